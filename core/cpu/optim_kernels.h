#pragma once
// defines: cpu::adam_step, cpu::sgd_step (core/cpu/optim.cpp).
// The CPU half of core/kernels/optim.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/optim.h"

namespace sg::cpu {
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& step);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step);
}  // namespace sg::cpu
