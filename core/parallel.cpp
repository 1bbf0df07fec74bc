#include "core/parallel.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace sg {

// Note [Threads that yield]
// Between two parallel regions an idle OpenMP thread spin-waits before it sleeps: GNU OpenMP
// (libgomp, which OpenBLAS and oneDNN share with our kernels) spins 300,000 times by default,
// several milliseconds. On a quiet machine that makes the next region start at once; with one
// other busy process on the machine it burns the core the other thread of our team needs, and a
// step of many short regions collapses (gpt-mini at 2 threads on 2 vCPUs: 0.54 s quiet, 11 s
// beside one busy loop; docs/performance.md, "Threads that yield"). A count is a number of loop
// turns, not a time, so one count must suit unlike CPUs: 1,000 spins keep a contended step within
// about 2x its quiet time on a Sapphire Rapids Xeon and on a Zen 5 (PyTorch's: 2.6-9x),
// and cost nothing measurable quietly on the Zen 5 and 2-5% of gpt-mini's step on the Xeon.
// 10,000, chosen on the Xeon alone, held a contended ResNet34 step at 4-5x its quiet time on the
// Zen 5.
//
// libgomp reads its spin count once, from GOMP_SPINCOUNT, when it is loaded — before any code of
// ours runs, even a constructor. So where the user has chosen neither GOMP_SPINCOUNT nor
// OMP_WAIT_POLICY, the program sets GOMP_SPINCOUNT and executes itself again, before main, as
// the sanitizers do to set up their own environment; the second start finds the variable set
// and goes on. Setting either variable yourself turns this off. Not under Valgrind (it follows
// an exec only with --trace-children=yes, and would otherwise check nothing), nor under clang's
// OpenMP runtime, which does not read GOMP_SPINCOUNT.
#ifndef __clang__
namespace {
constexpr const char* kSpinCount = "1000";

bool under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

__attribute__((constructor)) void start_again_with_a_short_spin(int /*argc*/, char** argv, char** /*envp*/) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (argv == nullptr || under_valgrind()) return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 0) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed (no /proc, the binary replaced on disk): run with
  // libgomp's default spin, as a program that never set the variable would.
}
}  // namespace
#endif

void set_num_threads(int num_threads) {
  SG_CHECK(num_threads >= 1, "set_num_threads: expected a positive count, got ", num_threads);
  omp_set_num_threads(num_threads);
}

int get_num_threads() { return omp_get_max_threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int threads =
      static_cast<int>(std::min<int64_t>(get_num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1)));
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + threads - 1) / threads;
#pragma omp parallel num_threads(threads)
  {
    // OpenMP may grant fewer threads than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC, a teams
    // region): each thread then takes every team-size-th chunk, so every chunk still runs and
    // the chunks stay the same.
    for (int64_t c = omp_get_thread_num(); c < threads; c += omp_get_num_threads()) {
      const int64_t begin = c * chunk;
      const int64_t end = std::min(n, begin + chunk);
      if (begin < end) fn(begin, end);
    }
  }
}

}  // namespace sg
