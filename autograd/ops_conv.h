#pragma once
// defines: the differentiable convolution and pooling ops — conv2d, max_pool2d,
//          max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d — with the arguments and
//          defaults of torch.nn.functional.
//
// Inputs are [N, C, H, W], or [C, H, W] for one image (the result then has no batch dim either).
// Sizes given as Size2 take one number for both dims or a {height, width} pair; an optional stride
// takes a number or Size2{h, w} (a bare {h, w} cannot initialise a std::optional).
#include <optional>
#include <utility>

#include "core/kernels/window.h"  // defines: Size2
#include "core/tensor.h"

namespace sg {

// out[n, k] = bias[k] + sum over the channels c of k's group of weight[k, c] (*) input[n, c], with
// weight [K, C / groups, R, S] and bias [K] (or undefined: no bias). out is [N, K, P, Q], where
// P = (H + 2 padding.h - dilation.h (R - 1) - 1) / stride.h + 1, and Q likewise.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
              Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1);

// The max of each kernel_size window (stride defaults to kernel_size). Padding, at most half the
// kernel, never wins; ceil_mode keeps a last partial window that starts inside the input.
Tensor max_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);
// max_pool2d and where each maximum was: i64 indices h * W + w within its plane (return_indices=True).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size,
                                                  std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                                                  Size2 dilation = 1, bool ceil_mode = false);

// The mean of each window; count_include_pad counts the zero padding in the divisor, and
// divisor_override replaces the divisor (core/kernels/pool.h).
Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

// Averages over output_size evenly spread (possibly overlapping) windows: [N, C, H, W] -> [N, C, oh, ow].
Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size);

}  // namespace sg
