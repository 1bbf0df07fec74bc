#pragma once
// defines: Pool2dWindow and the 2-D pooling kernels — max, average and adaptive average, each
//          with its backward — on [N, C, H, W] tensors (core/cpu/pool.cpp).
//
// Contract: the front (autograd/ops_conv.cpp) has checked the window and allocated the outputs
// contiguous, [N, C, P, Q] with P and Q from window_output_size (or the adaptive output size);
// gradients of the input are allocated with the input's shape. Inputs may have any strides.
// Floating dtypes only; f16 and bf16 average in f32. Every plane (n, c) is independent, so the
// kernels run in parallel over planes and each gradient sum has one fixed order.
#include <optional>

#include "core/kernels/window.h"
#include "core/tensor.h"

namespace sg {

// Output pixel (p, q) pools the input rows p * stride.h - padding.h + i * dilation.h, i < kernel_size.h,
// and the same for columns (core/kernels/window.h); taps on padding are skipped.
struct Pool2dWindow {
  Size2 kernel_size;
  Size2 stride;
  Size2 padding = 0;
  Size2 dilation = 1;
};

}  // namespace sg

namespace sg::kernels {

// out = the max of each window; indices (i64) = where it is, as h * W + w within the plane. The
// first maximum wins ties; NaN counts as the maximum (the last NaN of a window wins), as in PyTorch.
void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window);
// grad_input[plane][indices[o]] += grad_out[o] for every output o, in increasing o; `window` is the
// forward's (the GPU kernel gives each input element a thread that looks only at the outputs whose
// window reaches it).
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dWindow& window);

// The mean of each window: its sum divided by divisor_override when given, else by the number of
// taps inside the input plus padding (count_include_pad) or inside the input only. With ceil_mode,
// taps beyond the padding never count. A window with no tap inside the input gives 0.
void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dWindow& window, bool count_include_pad,
                std::optional<int64_t> divisor_override);
void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dWindow& window,
                         bool count_include_pad, std::optional<int64_t> divisor_override);

// Output (p, q) of a [P, Q] output averages input rows [floor(p H / P), ceil((p + 1) H / P)) and the
// columns likewise, as torch's adaptive_avg_pool2d.
void adaptive_avg_pool2d(const Tensor& out, const Tensor& input);
void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out);

}  // namespace sg::kernels
