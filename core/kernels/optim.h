#pragma once
// defines: the fused optimizer kernels (adam_step, sgd_step) — one pass over a parameter and
//          its gradient and state, instead of the half-dozen elementwise ops PyTorch's
//          single-tensor path runs; the math per element is core/optim_math.h.
//
// Contract: every tensor has the parameter's shape, dtype (floating) and device; the parameter
// and the state tensors are written in place; `max_exp_avg_sq` is undefined unless amsgrad,
// `momentum_buffer` undefined unless momentum != 0; a tensor that does not match the parameter
// throws naming it. Kernels do not bump storage versions: the optimizer does, once per step.
#include "core/optim_math.h"
#include "core/tensor.h"

namespace sg::kernels {
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& step);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step);
}  // namespace sg::kernels
