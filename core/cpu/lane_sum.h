#pragma once
// defines: cpu::lane_sum — a double sum over an index range that the compiler can vectorise
//          and whose result depends only on the data (used by the fused norm and loss kernels).
#include <cstdint>

namespace sg::cpu {

// Sums f(i) for i in [0, n) in double. Eight independent partial sums break the dependency from
// one addition to the next (one running total is bound by the add latency); they are joined in
// a fixed order, so the result does not depend on how the caller splits its work.
template <typename F>
double lane_sum(int64_t n, F f) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] += f(i + k);
  double total = 0;
  for (int k = 0; k < kLanes; ++k) total += lanes[k];
  for (; i < n; ++i) total += f(i);
  return total;
}

}  // namespace sg::cpu
