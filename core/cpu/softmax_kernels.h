#pragma once
// defines: cpu::softmax, cpu::softmax_backward (core/cpu/softmax.cpp).
// The CPU half of core/kernels/softmax.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/softmax.h"

namespace sg::cpu {
void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim);
void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim);
}  // namespace sg::cpu
