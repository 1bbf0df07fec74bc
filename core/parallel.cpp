#include "core/parallel.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"

namespace sg {

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
