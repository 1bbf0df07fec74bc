#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "core/cuda_runtime/device_allocator.h"
#include "core/error.h"

namespace sg {

// Note [CPU block cache]
// glibc serves large allocations with mmap and returns them to the system on free, so every
// step of a training loop page-faults its activations and gradients in again: measured ~15-20%
// of the CNN's training step (bench_models, 1 thread, 120 -> 100 ms with the cache). So freed
// blocks of at least kMinCachedBytes are kept and handed out again. The cache is bounded
// (kMaxCachedBytes; beyond it a freed block goes back to the system) and cpu_empty_cache()
// releases everything. Under AddressSanitizer the cache is off, so use-after-free is still caught.
//
// The blocks the cache holds are mapped with mmap and unmapped with munmap by the allocator itself,
// not through malloc: page-aligned (so 64-byte aligned), with no header and no arena behind them.
// Through aligned_alloc the same ResNet34 224² batch-4 step peaked 8 MB higher (453 against 445
// MB of RSS, bench_models, docs/performance.md): blocks between 64 and 128 KB came from malloc's heap,
// where they shared pages with small allocations that kept the heap from shrinking.
//
// Note [Best fit, split and merged]
// A step does not free and allocate the same sizes in the same order: the forward frees nothing
// large, the backward frees activations of one size and asks for gradients of another. A cache
// of exact sizes then held 180-226 MB of free blocks at the peak of ResNet34's step at 224², none
// of them the size asked for, while new pages were mapped beside them. Because every cached block
// is a run of whole pages that the allocator mapped itself, it may be cut and glued as the CUDA
// caching allocator does with device memory: a request takes the smallest free run that holds it
// (best fit) and the rest of the run stays free; a freed run joins the free runs either side of
// it. munmap works on any range of pages, so a run glued from two mappings is released in one
// call, and a cut run's halves are released separately.
namespace {

constexpr size_t kMinCachedBytes = size_t(1) << 16;
constexpr size_t kMaxCachedBytes = size_t(2) << 30;
constexpr size_t kPageBytes = 4096;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif

size_t round_up(size_t nbytes, size_t multiple) { return (nbytes + multiple - 1) / multiple * multiple; }

// Whether a request of `nbytes` is served by the allocator's own pages and may be cached. Under
// AddressSanitizer every block comes from malloc, where the sanitizer sees it.
bool cacheable(size_t nbytes) { return kCacheEnabled && nbytes >= kMinCachedBytes; }

// What a request really takes: whole pages for a cached block, else a multiple of the alignment
// (aligned_alloc needs one).
size_t block_size(size_t nbytes) { return round_up(nbytes, cacheable(nbytes) ? kPageBytes : kCpuAlignment); }

void* map_pages(size_t size) {
  void* ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

// Free runs of pages, found by size (best fit) and by address (to merge neighbours).
class FreeRuns {
public:
  size_t total_bytes() const { return total_bytes_; }

  // Takes `size` bytes from the front of the smallest run that holds them; the rest stays free.
  char* take(size_t size) {
    const auto fit = by_size_.lower_bound({size, nullptr});
    if (fit == by_size_.end()) return nullptr;
    const auto [run_size, start] = *fit;
    erase(start, run_size);
    if (run_size > size) insert(start + size, run_size - size);
    return start;
  }

  // Adds a run, merged with the free runs that end where it starts and start where it ends.
  void give(char* start, size_t size) {
    const auto next = by_address_.find(start + size);
    if (next != by_address_.end()) {
      size += next->second;
      erase(next->first, next->second);
    }
    const auto after = by_address_.lower_bound(start);
    if (after != by_address_.begin()) {
      const auto previous = std::prev(after);
      if (previous->first + previous->second == start) {
        start = previous->first;
        size += previous->second;
        erase(previous->first, previous->second);
      }
    }
    insert(start, size);
  }

  void release_all() {
    for (const auto& [start, size] : by_address_) munmap(start, size);
    by_address_.clear();
    by_size_.clear();
    total_bytes_ = 0;
  }

private:
  void insert(char* start, size_t size) {
    by_address_.emplace(start, size);
    by_size_.emplace(size, start);
    total_bytes_ += size;
  }
  void erase(char* start, size_t size) {
    by_address_.erase(start);
    by_size_.erase({size, start});
    total_bytes_ -= size;
  }

  std::map<char*, size_t> by_address_;
  std::set<std::pair<size_t, char*>> by_size_;
  size_t total_bytes_ = 0;
};

class CpuAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = block_size(nbytes);
    void* ptr = nullptr;
    if (cacheable(nbytes)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ptr = free_runs_.take(size);
        if (ptr != nullptr) ++hits_;
        else ++misses_;
      }
      if (ptr == nullptr) ptr = map_pages(size);
    } else {
      ptr = std::aligned_alloc(kCpuAlignment, size);
    }
    SG_CHECK(ptr != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    if (!cacheable(nbytes)) {
      std::free(ptr);
      return;
    }
    const size_t size = block_size(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_runs_.total_bytes() + size <= kMaxCachedBytes) {
        free_runs_.give(static_cast<char*>(ptr), size);
        return;
      }
    }
    munmap(ptr, size);  // the cache is full: back to the system
  }

  Device device() const override { return Device::cpu(); }

  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {free_runs_.total_bytes(), hits_, misses_};
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    free_runs_.release_all();
  }

private:
  std::mutex mutex_;  // DataLoader workers allocate too
  FreeRuns free_runs_;
  size_t hits_ = 0, misses_ = 0;
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
