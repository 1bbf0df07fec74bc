#pragma once
// defines: cuda::batch_norm, cuda::batch_norm_backward, cuda::layer_norm, cuda::layer_norm_backward.
// The CUDA half of core/kernels/norm.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/norm.h"

namespace sg::cuda {
// core/cuda/batch_norm.cpp (cuDNN)
void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input,
                const kernels::BatchNormArgs& args);
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training);
// core/cuda/layer_norm.cu
void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, int64_t row_length, double eps);
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, int64_t row_length);
}  // namespace sg::cuda
