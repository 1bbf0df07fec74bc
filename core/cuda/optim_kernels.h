#pragma once
// defines: cuda::adam_step, cuda::sgd_step (core/cuda/optim.cu).
// The CUDA half of core/kernels/optim.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/optim.h"

namespace sg::cuda {
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& step);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step);
}  // namespace sg::cuda
