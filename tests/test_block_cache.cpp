// The CUDA caching allocator's policy (core/cuda_runtime/block_cache.h), checked on the CPU with a
// backend that hands out host memory and counts: this part of the GPU backend runs here.
#include <cstdlib>
#include <set>

#include "core/cuda_runtime/block_cache.h"
#include "core/cuda_runtime/event.h"
#include "helpers.h"

using namespace sg;
using cuda::BlockCache;

namespace {

// A backend over malloc that counts calls and can be told to run out of memory.
struct CountingBackend {
  size_t allocations = 0, releases = 0;
  size_t limit_bytes = SIZE_MAX;  // "device memory": allocate fails past it
  size_t live_bytes = 0;
  std::set<void*> live;

  BlockCache::Backend backend() {
    return {.allocate = [this](size_t size) -> void* {
              if (live_bytes + size > limit_bytes) return nullptr;
              void* block = std::malloc(size);
              ++allocations;
              live_bytes += size;
              live.insert(block);
              sizes[block] = size;
              return block;
            },
            .release =
                [this](void* block) {
                  ++releases;
                  live_bytes -= sizes.at(block);
                  live.erase(block);
                  std::free(block);
                }};
  }
  std::map<void*, size_t> sizes;
};

}  // namespace

TEST_CASE("size classes: 512-byte steps below 1 MiB, a quarter of the power of two above") {
  CHECK(BlockCache::size_class(0) == 0);
  CHECK(BlockCache::size_class(1) == 512);
  CHECK(BlockCache::size_class(512) == 512);
  CHECK(BlockCache::size_class(513) == 1024);
  CHECK(BlockCache::size_class((1 << 20) - 1) == (1 << 20));
  CHECK(BlockCache::size_class(1 << 20) == (1 << 20));
  CHECK(BlockCache::size_class((1 << 20) + 1) == (1 << 20) + (1 << 18));
  CHECK(BlockCache::size_class(100'000'000) == 6 * (size_t(1) << 24));  // above 2^26: steps of 2^24
  for (size_t n : {size_t(3), size_t(70'000), size_t(3'000'001), size_t(123'456'789)}) {
    const size_t c = BlockCache::size_class(n);
    CHECK(c >= n);
    CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(n) + 512);  // at most a quarter wasted
  }
}

TEST_CASE("a freed block is reused for the next request of its size class, not returned to the backend") {
  CountingBackend counting;
  BlockCache cache(counting.backend(), "test");
  void* a = cache.allocate(1000);
  cache.deallocate(a, 1000);
  void* b = cache.allocate(900);  // same 1024-byte class
  CHECK(b == a);
  CHECK(counting.allocations == 1);
  CHECK(counting.releases == 0);
  void* c = cache.allocate(5000);  // another class: a new block
  CHECK(c != a);
  CHECK(counting.allocations == 2);
  const cuda::MemoryStats stats = cache.stats();
  CHECK(stats.allocations == 3);
  CHECK(stats.cache_hits == 1);
  CHECK(stats.device_allocations == 2);
  CHECK(stats.allocated_bytes == 1024 + 5120);
  cache.deallocate(b, 900);
  cache.deallocate(c, 5000);
}

TEST_CASE("memory statistics: allocated, reserved and the peak follow allocations and frees") {
  CountingBackend counting;
  BlockCache cache(counting.backend(), "test");
  void* a = cache.allocate(2 << 20);
  void* b = cache.allocate(512);
  CHECK(cache.stats().allocated_bytes == (2 << 20) + 512);
  cache.deallocate(a, 2 << 20);
  cuda::MemoryStats stats = cache.stats();
  CHECK(stats.allocated_bytes == 512);
  CHECK(stats.reserved_bytes == (2 << 20) + 512);  // the freed block is still held
  CHECK(stats.peak_allocated_bytes == (2 << 20) + 512);
  cache.reset_peak();
  CHECK(cache.stats().peak_allocated_bytes == 512);
  cache.empty_cache();
  CHECK(cache.stats().reserved_bytes == 512);
  CHECK(counting.releases == 1);
  cache.deallocate(b, 512);
}

TEST_CASE("out of memory: the cache is emptied and the request retried, if it still fails, the error says how much") {
  CountingBackend counting;
  counting.limit_bytes = 3 << 20;
  BlockCache cache(counting.backend(), "cuda:7");
  void* a = cache.allocate(2 << 20);
  cache.deallocate(a, 2 << 20);       // cached: the backend still holds 2 MiB
  void* b = cache.allocate(3 << 20);  // needs the cached 2 MiB back
  CHECK(b != nullptr);
  CHECK(counting.releases == 1);
  try {
    cache.allocate(1 << 20);
    FAIL("expected an out-of-memory error");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("out of memory on cuda:7") != std::string::npos);
    CHECK(message.find("tried to allocate 1 MiB") != std::string::npos);
    CHECK(message.find("3 MiB held by live tensors") != std::string::npos);
  }
  cache.deallocate(b, 3 << 20);
}

TEST_CASE("destroying the cache releases the cached blocks") {
  CountingBackend counting;
  {
    BlockCache cache(counting.backend(), "test");
    for (size_t size : {size_t(100), size_t(5000), size_t(2 << 20)}) cache.deallocate(cache.allocate(size), size);
  }
  CHECK(counting.allocations == 3);
  CHECK(counting.releases == 3);
  CHECK(counting.live.empty());
}

TEST_CASE("without a GPU, CUDA reports itself unavailable and a CUDA tensor is a clear error") {
  if (cuda::is_available()) return;  // this machine has a GPU: tests/cuda/ checks the real thing
  CHECK(cuda::device_count() == 0);
  CHECK_FALSE(cuda::unavailable_reason().empty());
  try {
    zeros({2, 3}, {DType::f32, Device::cuda(0)});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("cuda:0") != std::string::npos);
    CHECK(std::string(e.what()).find("CUDA is not available") != std::string::npos);
  }
  CHECK_THROWS_AS(randn({4}).to(Device::cuda(0)), Error);
  CHECK_THROWS_AS(cuda::Event(), Error);
  CHECK_THROWS_AS(cuda::synchronize(), Error);
}
