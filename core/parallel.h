#pragma once
// defines: set_num_threads, get_num_threads, parallel_for — the one intra-op thread pool.
#include <cstdint>
#include <functional>

namespace sg {

// Sizes the OpenMP pool every kernel (and OpenBLAS's OpenMP build) uses.
void set_num_threads(int num_threads);
int get_num_threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n). Runs serially when n < grain or
// when already inside a parallel region (kernels never nest). Chunks are fixed by n and the
// thread count, so results that depend on chunking are reproducible.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Work below this many elements is not worth waking threads for.
inline constexpr int64_t kParallelGrain = 32768;

}  // namespace sg
