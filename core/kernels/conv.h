#pragma once
// defines: Conv2dParams and the 2-D convolution kernels — conv2d (forward), conv2d_grad_input,
//          conv2d_grad_weight — on NCHW tensors; on the CPU oneDNN's blocked kernels where they pay
//          off, else im2col + GEMM, the reference (core/cpu/conv.cpp); on GPUs cuDNN (core/cuda/conv.cpp).
//
// Shape letters, as cuDNN's: input [N, C, H, W], weight [K, C / G, R, S], bias [K],
// out [N, K, P, Q], with G groups and P = window_output_size(H, R, stride.h, padding.h,
// dilation.h) (Q likewise).
//
// Contract: the front (autograd/ops_conv.cpp) has checked the shapes, that every tensor has one
// floating dtype and one device, and allocated the outputs contiguous. Inputs may have any
// strides. grad_bias is not a kernel: it is grad_out summed over N, P and Q.
#include "core/kernels/window.h"
#include "core/tensor.h"

namespace sg {

struct Conv2dParams {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
};

}  // namespace sg

namespace sg::kernels {

// out = input (*) weight (+ bias when defined), out[n, k, p, q] = bias[k] + sum over c in k's group,
// r, s of weight[k, c, r, s] * input[n, c, p * stride.h - padding.h + r * dilation.h, ...].
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params);
// grad_input = d(sum(grad_out * conv2d(input, weight)))/d input: the transposed convolution.
void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params);
// grad_weight[k, c, r, s] = sum over n, p, q of grad_out[n, k, p, q] * input[n, c, ...].
void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params);

}  // namespace sg::kernels
