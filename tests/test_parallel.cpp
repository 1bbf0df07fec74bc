// parallel_for: every index is visited exactly once, whatever threads OpenMP actually grants.
#include <vector>

#include "helpers.h"

using namespace sg;

namespace {
// How often parallel_for(n, grain) visits each index.
std::vector<int> visits(int64_t n, int64_t grain) {
  std::vector<int> count(static_cast<size_t>(n), 0);
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++count[static_cast<size_t>(i)];  // chunks are disjoint: no race
  });
  return count;
}
}  // namespace

TEST_CASE("parallel_for visits every index once for any thread count and grain") {
  for (int threads : {1, 2, 3}) {
    test::NumThreadsGuard guard(threads);
    for (int64_t n : {0, 1, 7, 1000, 100003}) {
      for (int64_t grain : {int64_t{1}, int64_t{64}, kParallelGrain}) {
        INFO("threads ", threads, ", n ", n, ", grain ", grain);
        CHECK(visits(n, grain) == std::vector<int>(static_cast<size_t>(n), 1));
      }
    }
  }
}

TEST_CASE("parallel_for visits every index when OpenMP grants fewer threads than asked") {
  test::NumThreadsGuard guard(2);
  std::vector<int> count;
  // A teams region with a thread limit of 1 is an in-process way to get a one-thread team
  // where two were asked for (as OMP_THREAD_LIMIT=1 or OMP_DYNAMIC would).
#pragma omp teams num_teams(1) thread_limit(1)
  count = visits(100000, 1000);
  CHECK(count == std::vector<int>(100000, 1));
}

TEST_CASE("parallel_for inside a parallel region runs serially over the whole range") {
  test::NumThreadsGuard guard(2);
  std::vector<int> count;
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    count = visits(50000, 100);
  }
  CHECK(count == std::vector<int>(50000, 1));
}
