#pragma once
// defines: kernels::non_finite_check_and_unscale_ — GradScaler's fused pass over one gradient:
//          multiply by 1/scale and look for inf/NaN in the same read of memory.
//
// Contract: `grad` is floating (computed in opmath_t, so f16 and bf16 gradients are multiplied
// in f32 and rounded once); `found_inf` is a one-element f32 tensor on grad's device that is set
// to 1 when some element of grad is inf or NaN and otherwise left as it was, so one flag collects
// the result over all gradients of a step. The per-element math is core/amp_math.h.
#include "core/tensor.h"

namespace sg::kernels {
void non_finite_check_and_unscale_(const Tensor& grad, const Tensor& found_inf, double inv_scale);
}  // namespace sg::kernels
