#pragma once
// defines: cuda::BlockCache — the caching policy behind every CUDA tensor's memory.
//
// Note [Why GPU memory is cached]
// cudaMalloc and cudaFree are slow (cudaFree synchronises the whole device), and a training
// step allocates and frees the same sizes every step. So a freed block is not returned to the
// driver: it waits in a free list of its size class and the next request of that class takes
// it. Sizes are rounded up to classes (multiples of 512 bytes below 1 MiB; above, a power of two
// split in four steps, so at most 25% is wasted) so that slightly different sizes share blocks.
// When the driver is out of memory, every cached block is released and the request retried once.
// Blocks are reused in issue order on the one compute stream (Note [One compute stream]).
//
// The policy knows nothing of CUDA: it draws raw blocks from a Backend, so the CPU test suite
// checks it with a counting backend (tests/test_block_cache.cpp).
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda_runtime/runtime.h"

namespace sg::cuda {

class BlockCache {
public:
  struct Backend {
    std::function<void*(size_t)> allocate;  // nullptr when out of memory
    std::function<void(void*)> release;
  };
  // `name` ("cuda:0") labels out-of-memory errors.
  BlockCache(Backend backend, std::string name);
  ~BlockCache();  // releases the cached blocks (live ones belong to their tensors)
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // A block of at least `nbytes` (nullptr for 0). Throws sg::Error when the backend cannot
  // provide one even after the cache was emptied.
  void* allocate(size_t nbytes);
  // Takes back a block allocate() returned for the same `nbytes`.
  void deallocate(void* block, size_t nbytes);
  void empty_cache();

  MemoryStats stats() const;
  void reset_peak();

  static size_t size_class(size_t nbytes);

private:
  void release_cached_locked();

  Backend backend_;
  std::string name_;
  mutable std::mutex mutex_;                          // DataLoader workers and the main thread may free at once
  std::map<size_t, std::vector<void*>> free_blocks_;  // size class -> cached blocks
  size_t cached_bytes_ = 0;
  MemoryStats stats_;
};

}  // namespace sg::cuda
