#pragma once
// defines: cuda::conv2d, cuda::conv2d_grad_input, cuda::conv2d_grad_weight (core/cuda/conv.cpp, cuDNN).
// The CUDA half of core/kernels/conv.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/conv.h"

namespace sg::cuda {
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params);
void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params);
void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params);
}  // namespace sg::cuda
