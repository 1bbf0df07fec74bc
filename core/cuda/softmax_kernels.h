#pragma once
// defines: cuda::softmax, cuda::softmax_backward (core/cuda/softmax.cu).
// The CUDA half of core/kernels/softmax.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/softmax.h"

namespace sg::cuda {
void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim);
void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim);
}  // namespace sg::cuda
