#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda_runtime/device_allocator.h"
#include "core/error.h"

namespace sg {

// Note [CPU block cache]
// glibc serves large allocations with mmap and returns them to the system on free, so every
// step of a training loop page-faults its activations and gradients in again: measured ~15-20%
// of the CNN's training step (bench_models, 1 thread, 120 -> 100 ms with the cache). Steps
// allocate the same sizes over and over, so freed blocks of at least kMinCachedBytes are kept in
// per-size free lists and handed out again. The cache is bounded (kMaxCachedBytes; beyond it a
// freed block goes back to the system) and cpu_empty_cache() releases everything. Under
// AddressSanitizer the cache is off, so use-after-free is still caught.
//
// The blocks the cache holds are mapped with mmap and unmapped with munmap by the allocator itself,
// not through malloc: page-aligned (so 64-byte aligned), with no header and no arena behind them.
// Through aligned_alloc the same ResNet34 224² batch-4 step peaked 8 MB higher (453 against 445
// MB of RSS, bench_models, docs/performance.md): blocks between 64 and 128 KB came from malloc's heap,
// where they shared pages with small allocations that kept the heap from shrinking.
namespace {

constexpr size_t kMinCachedBytes = size_t(1) << 16;
constexpr size_t kMaxCachedBytes = size_t(2) << 30;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif

size_t rounded_size(size_t nbytes) { return (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment; }

// Whether a block of `size` (rounded) bytes is mapped by the allocator and may be cached. Under
// AddressSanitizer every block comes from malloc, where the sanitizer sees it.
bool cacheable(size_t size) { return kCacheEnabled && size >= kMinCachedBytes; }

void* map_pages(size_t size) {
  void* ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

void release(void* ptr, size_t size) {
  if (cacheable(size)) munmap(ptr, size);
  else std::free(ptr);
}

class CpuAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = rounded_size(nbytes);  // aligned_alloc needs a multiple of the alignment
    if (cacheable(size)) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_blocks_.find(size);
      if (it != free_blocks_.end() && !it->second.empty()) {
        void* ptr = it->second.back();
        it->second.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.hits;
        return ptr;
      }
      ++stats_.misses;
    }
    void* ptr = cacheable(size) ? map_pages(size) : std::aligned_alloc(kCpuAlignment, size);
    SG_CHECK(ptr != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    const size_t size = rounded_size(nbytes);
    if (cacheable(size)) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stats_.cached_bytes + size <= kMaxCachedBytes) {
        free_blocks_[size].push_back(ptr);
        stats_.cached_bytes += size;
        return;
      }
    }
    release(ptr, size);
  }

  Device device() const override { return Device::cpu(); }

  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_blocks_)
      for (void* ptr : blocks) release(ptr, size);
    free_blocks_.clear();
    stats_.cached_bytes = 0;
  }

private:
  std::mutex mutex_;  // DataLoader workers allocate too
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;
  CpuCacheStats stats_;
};

// Never destroyed: a tensor in a static object may be freed after any static destructor ran.
CpuAllocator& the_cpu_allocator() {
  static CpuAllocator* allocator = new CpuAllocator;
  return *allocator;
}

}  // namespace

Allocator& cpu_allocator() { return the_cpu_allocator(); }

CpuCacheStats cpu_cache_stats() { return the_cpu_allocator().stats(); }
void cpu_empty_cache() { the_cpu_allocator().empty_cache(); }

Allocator& allocator_for(const Device& device) {
  if (runs_on_cuda(device, "allocate")) {
    if constexpr (kCudaBuild) return cuda::device_allocator(device.index);
  }
  return cpu_allocator();
}

}  // namespace sg
