#pragma once
// defines: the fused softmax / log-softmax kernels, forward and backward.
//
// Contract: every tensor has the same shape; `dim` is in range (any dim, not only the last);
// outputs are allocated by the caller, contiguous, with the input's floating dtype; inputs may
// have any strides. Each "row" (the elements along `dim` for one position of the other dims)
// is reduced and written in a few passes over that row only, never through temporaries of the
// full tensor size: that is what makes these faster than exp(x - max) / sum composed of ops.
// Math runs in opmath_t (float for f16/bf16/f32, double for f64); 16-bit results round once.
#include "core/tensor.h"

namespace sg {
enum class SoftmaxKind { softmax, log_softmax };
inline const char* softmax_name(SoftmaxKind kind) { return kind == SoftmaxKind::softmax ? "softmax" : "log_softmax"; }
}  // namespace sg

namespace sg::kernels {

// softmax:     out = exp(x - max) / sum(exp(x - max))
// log_softmax: out = x - max - log(sum(exp(x - max)))
// A row of all -inf gives NaN, as in PyTorch.
void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim);
// From the forward's output y and the gradient g of the loss with respect to it:
// softmax:     grad_in = y * (g - sum(g * y))
// log_softmax: grad_in = g - exp(y) * sum(g)
// g and y share y's dtype.
void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim);

}  // namespace sg::kernels
