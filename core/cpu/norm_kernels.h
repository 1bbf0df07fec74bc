#pragma once
// defines: cpu::batch_norm, cpu::batch_norm_backward, cpu::layer_norm, cpu::layer_norm_backward (core/cpu/norm.cpp).
// The CPU half of core/kernels/norm.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/norm.h"

namespace sg::cpu {
void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input,
                const kernels::BatchNormArgs& args);
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training);
void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, int64_t row_length, double eps);
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, int64_t row_length);
}  // namespace sg::cpu
