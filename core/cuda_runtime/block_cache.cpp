#include "core/cuda_runtime/block_cache.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace sg::cuda {

namespace {
constexpr size_t kSmallStep = 512;                   // small blocks: multiples of this
constexpr size_t kLargeThreshold = size_t(1) << 20;  // 1 MiB
constexpr size_t kStepsPerPowerOfTwo = 4;

double mebibytes(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
}  // namespace

size_t BlockCache::size_class(size_t nbytes) {
  if (nbytes == 0) return 0;
  if (nbytes < kLargeThreshold) return (nbytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  const size_t power = std::bit_floor(nbytes);
  const size_t step = power / kStepsPerPowerOfTwo;
  return (nbytes + step - 1) / step * step;
}

BlockCache::BlockCache(Backend backend, std::string name) : backend_(std::move(backend)), name_(std::move(name)) {}

BlockCache::~BlockCache() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void* BlockCache::allocate(size_t nbytes) {
  const size_t size = size_class(nbytes);
  if (size == 0) return nullptr;
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  void* block = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    block = cached->second.back();
    cached->second.pop_back();
    cached_bytes_ -= size;
    ++stats_.cache_hits;
  } else {
    block = backend_.allocate(size);
    if (block == nullptr && cached_bytes_ > 0) {  // out of memory: give the cache back, try once more
      release_cached_locked();
      block = backend_.allocate(size);
    }
    SG_CHECK(block != nullptr, "out of memory on ", name_, ": tried to allocate ", mebibytes(size), " MiB with ",
             mebibytes(stats_.allocated_bytes), " MiB held by live tensors (the cache held ",
             mebibytes(stats_.reserved_bytes - stats_.allocated_bytes), " MiB and was emptied first)");
    ++stats_.device_allocations;
    stats_.reserved_bytes += size;
  }
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return block;
}

void BlockCache::deallocate(void* block, size_t nbytes) {
  if (block == nullptr) return;
  const size_t size = size_class(nbytes);
  std::lock_guard lock(mutex_);
  free_blocks_[size].push_back(block);
  cached_bytes_ += size;
  stats_.allocated_bytes -= size;
}

void BlockCache::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void BlockCache::release_cached_locked() {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* block : blocks) backend_.release(block);
    stats_.reserved_bytes -= size * blocks.size();
  }
  free_blocks_.clear();
  cached_bytes_ = 0;
}

MemoryStats BlockCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void BlockCache::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

}  // namespace sg::cuda
