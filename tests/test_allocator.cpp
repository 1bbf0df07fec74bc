// The CPU allocator: alignment, and reuse of large blocks (Note [CPU block cache], Note [Best fit,
// split and merged]).
#include <cstdint>

#include "helpers.h"

using namespace sg;

TEST_CASE("tensor memory is 64-byte aligned") {
  for (int64_t n : {1, 7, 1000, 70000}) {
    const Tensor t = empty({n});
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % kCpuAlignment == 0);
  }
}

#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("a freed large block is reused for the next allocation of its size") {
  cpu_empty_cache();
  void* first_address = nullptr;
  {
    const Tensor big = empty({1 << 18});  // 1 MiB
    first_address = big.raw_data();
  }
  CHECK(cpu_cache_stats().cached_bytes == size_t(1) << 20);
  const size_t hits = cpu_cache_stats().hits;
  const Tensor again = empty({1 << 18});
  CHECK(again.raw_data() == first_address);
  CHECK(cpu_cache_stats().hits == hits + 1);
  CHECK(cpu_cache_stats().cached_bytes == 0);
}

TEST_CASE("a smaller request takes the front of a freed block and the rest stays cached") {
  // Note [Best fit, split and merged]
  cpu_empty_cache();
  void* first_address = nullptr;
  {
    const Tensor big = empty({1 << 18});  // 1 MiB
    first_address = big.raw_data();
  }
  const size_t hits = cpu_cache_stats().hits;
  const Tensor quarter = empty({1 << 16});  // 256 KiB
  CHECK(quarter.raw_data() == first_address);
  CHECK(cpu_cache_stats().hits == hits + 1);
  CHECK(cpu_cache_stats().cached_bytes == size_t(768) << 10);
}

TEST_CASE("freed neighbours merge into one block that serves their joint size") {
  cpu_empty_cache();
  void* first_address = nullptr;
  {
    const Tensor big = empty({1 << 18});  // 1 MiB, freed, then cut in two halves
    first_address = big.raw_data();
  }
  {
    const Tensor front = empty({1 << 17}), back = empty({1 << 17});
    CHECK(front.raw_data() == first_address);
    CHECK(static_cast<const char*>(back.raw_data()) == static_cast<const char*>(first_address) + (size_t(1) << 19));
  }
  CHECK(cpu_cache_stats().cached_bytes == size_t(1) << 20);
  const size_t misses = cpu_cache_stats().misses;
  const Tensor whole = empty({1 << 18});
  CHECK(whole.raw_data() == first_address);
  CHECK(cpu_cache_stats().misses == misses);
  CHECK(cpu_cache_stats().cached_bytes == 0);
}

TEST_CASE("a reused block holds what its new owner writes, not stale zeros assumed") {
  cpu_empty_cache();
  { Tensor scratch = full({1 << 17}, 3.0); }
  const Tensor zeroed = zeros({1 << 17});  // same size: served from the cache, must still be zeros
  CHECK(zeroed.sum().item() == 0.0);
}

TEST_CASE("empty_cache releases every cached block") {
  { Tensor a = empty({1 << 16}), b = empty({1 << 17}); }
  CHECK(cpu_cache_stats().cached_bytes > 0);
  cpu_empty_cache();
  CHECK(cpu_cache_stats().cached_bytes == 0);
}
#endif
