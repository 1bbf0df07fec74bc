#pragma once
// defines: cuda::cross_entropy, cuda::cross_entropy_backward (core/cuda/cross_entropy.cu).
// The CUDA half of core/kernels/loss.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/loss.h"

namespace sg::cuda {
void cross_entropy(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& input,
                   const Tensor& target, const kernels::CrossEntropyArgs& args);
void cross_entropy_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                            const Tensor& total_weight, const Tensor& input, const Tensor& target,
                            const kernels::CrossEntropyArgs& args);
}  // namespace sg::cuda
