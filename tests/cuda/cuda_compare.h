#pragma once
// defines: the GPU suite's comparisons — a GPU result against the CPU result of the same op.
#include <doctest/doctest.h>

#include "syncgrad.h"

namespace sg::test {

inline Device gpu() { return Device::cuda(0); }

// Relative tolerances: f32 to 1e-5 (the bar; reductions sum in another order on the
// GPU), f16 and bf16 to a few units of their last place, f64 tight, integers exact.
double tolerance_for(DType dtype);

// |gpu - cpu| <= tolerance * (|cpu| + 1) element by element (the +1 keeps values near zero
// from demanding an impossible relative match), after copying `gpu` back to the host. Shapes,
// dtypes and devices are checked first.
void check_matches_cpu(const Tensor& gpu_result, const Tensor& cpu_result, double tolerance = -1);

}  // namespace sg::test
