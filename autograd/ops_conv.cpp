// Differentiable convolution and pooling. Each front checks the shapes against PyTorch's rules,
// allocates the output, runs a kernel from core/kernels/conv.h or core/kernels/pool.h, and records
// a backward that runs the matching backward kernel.
#include "autograd/ops_conv.h"

#include "autograd/autocast_policy.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/conv.h"
#include "core/kernels/pool.h"
#include "core/pool_math.h"

namespace sg {

using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

void check_image_input(const char* op_name, const Tensor& input) {
  SG_CHECK(input.dim() == 3 || input.dim() == 4, op_name,
           ": expected a 3-D [C, H, W] (unbatched) or 4-D [N, C, H, W] (batched) input, got shape ",
           shape_str(input.sizes()));
  SG_CHECK(is_floating(input.dtype()), op_name, ": expected a floating input, got ", input.dtype());
}

void check_positive(const char* op_name, const char* what, Size2 size) {
  SG_CHECK(size.h > 0 && size.w > 0, op_name, ": ", what, " must be positive, got ", size.str());
}

// The same dtype and device as the input (undefined tensors, such as a missing bias, pass).
void check_like_input(const char* op_name, const char* what, const Tensor& t, const Tensor& input) {
  if (!t.defined()) return;
  SG_CHECK(t.dtype() == input.dtype(), op_name, ": ", what, " is ", t.dtype(), " but the input is ", input.dtype());
  SG_CHECK(t.device() == input.device(), op_name, ": ", what, " is on ", t.device(), " but the input is on ",
           input.device());
}

// [N, K, P, Q] of conv2d(input [N, C, H, W], weight [K, C / groups, R, S]), with PyTorch's checks.
Shape conv2d_output_shape(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& params) {
  check_like_input("conv2d", "weight", weight, input);
  check_like_input("conv2d", "bias", bias, input);
  SG_CHECK(weight.dim() == 4,
           "conv2d: expected a 4-D weight [out_channels, in_channels / groups, kernel_h, kernel_w], "
           "got shape ",
           shape_str(weight.sizes()));
  check_positive("conv2d", "stride", params.stride);
  check_positive("conv2d", "dilation", params.dilation);
  SG_CHECK(params.padding.h >= 0 && params.padding.w >= 0, "conv2d: padding must be non-negative, got ",
           params.padding.str());
  SG_CHECK(params.groups > 0, "conv2d: groups must be positive, got ", params.groups);
  const int64_t K = weight.size(0), C = input.size(1);
  SG_CHECK(K % params.groups == 0, "conv2d: weight ", shape_str(weight.sizes()), " has ", K,
           " output channels, which groups=", params.groups, " does not divide");
  SG_CHECK(weight.size(1) * params.groups == C, "conv2d: weight ", shape_str(weight.sizes()),
           " with groups=", params.groups, " expects in_channels * groups = ", weight.size(1) * params.groups,
           " input channels, but the input ", shape_str(input.sizes()), " has ", C);
  SG_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == K), "conv2d: expected a bias of shape [", K,
           "] for weight ", shape_str(weight.sizes()), ", got ", shape_str(bias.sizes()));
  const int64_t P =
      window_output_size(input.size(2), weight.size(2), params.stride.h, params.padding.h, params.dilation.h);
  const int64_t Q =
      window_output_size(input.size(3), weight.size(3), params.stride.w, params.padding.w, params.dilation.w);
  SG_CHECK(P > 0 && Q > 0, "conv2d: the input ", shape_str(input.sizes()), " padded by ", params.padding.str(),
           " is smaller than the kernel of weight ", shape_str(weight.sizes()), " dilated by ", params.dilation.str());
  return {input.size(0), K, P, Q};
}

// [N, C, P, Q] of a pooling window over input [N, C, H, W], with PyTorch's checks.
Shape pool_output_shape(const char* op_name, const Tensor& input, const Pool2dWindow& window, bool ceil_mode) {
  check_positive(op_name, "kernel_size", window.kernel_size);
  check_positive(op_name, "stride", window.stride);
  check_positive(op_name, "dilation", window.dilation);
  SG_CHECK(window.padding.h >= 0 && window.padding.w >= 0 && window.padding.h <= window.kernel_size.h / 2 &&
               window.padding.w <= window.kernel_size.w / 2,
           op_name, ": padding must be between 0 and half the kernel size, got padding ", window.padding.str(),
           " for kernel_size ", window.kernel_size.str());
  SG_CHECK(input.size(1) > 0 && input.size(2) > 0 && input.size(3) > 0, op_name,
           ": expected non-empty channels, height and width, got input of shape ", shape_str(input.sizes()));
  const int64_t P = window_output_size(input.size(2), window.kernel_size.h, window.stride.h, window.padding.h,
                                       window.dilation.h, ceil_mode);
  const int64_t Q = window_output_size(input.size(3), window.kernel_size.w, window.stride.w, window.padding.w,
                                       window.dilation.w, ceil_mode);
  SG_CHECK(P > 0 && Q > 0, op_name, ": the input ", shape_str(input.sizes()), " is too small for kernel_size ",
           window.kernel_size.str(), " with padding ", window.padding.str(), " and dilation ", window.dilation.str(),
           " (the output would be ", P, " x ", Q, ")");
  // With dilation, a window's taps can all fall on padding or step over an input narrower than
  // the gaps between them. PyTorch then returns -inf with an index outside the window, which its
  // backward writes through; here such a window is an error.
  const auto check_every_window_sees_input = [&](const char* dim, int64_t outputs, int64_t size, int64_t kernel,
                                                 int64_t stride, int64_t padding, int64_t dilation) {
    for (int64_t o = 0; o < outputs; ++o) {
      const math::TapRange taps = math::taps_inside(o, size, kernel, stride, padding, dilation);
      SG_CHECK(taps.begin < taps.end, op_name, ": the window of output ", dim, " ", o, " (kernel_size ",
               window.kernel_size.str(), ", stride ", window.stride.str(), ", padding ", window.padding.str(),
               ", dilation ", window.dilation.str(), ") has no tap inside the input ", shape_str(input.sizes()),
               ": every window must cover at least one input element");
    }
  };
  check_every_window_sees_input("row", P, input.size(2), window.kernel_size.h, window.stride.h, window.padding.h,
                                window.dilation.h);
  check_every_window_sees_input("column", Q, input.size(3), window.kernel_size.w, window.stride.w, window.padding.w,
                                window.dilation.w);
  return {input.size(0), input.size(1), P, Q};
}

Tensor empty_like_shape(const Shape& shape, const Tensor& like) { return empty(shape, {like.dtype(), like.device()}); }

}  // namespace

// ---- convolution ----

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
              Size2 dilation, int64_t groups) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::conv2d, input, weight, bias))
    return conv2d((*cast)[0], (*cast)[1], (*cast)[2], stride, padding, dilation, groups);
  check_image_input("conv2d", input);
  if (input.dim() == 3) return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  const Conv2dParams params{stride, padding, dilation, groups};
  Tensor out = empty_like_shape(conv2d_output_shape(input, weight, bias, params), input);
  kernels::conv2d(out, input, weight, bias, params);
  // d/dinput: the transposed convolution of g with weight;
  // d/dweight[k, c, r, s] = sum over n, p, q of g[n, k, p, q] * input[n, c, p stride.h - padding.h + r dilation.h,
  // ...]; d/dbias[k] = sum over n, p, q of g[n, k, p, q]
  return record("ConvolutionBackward", out, {input, weight, bias},
                [si = SavedTensor(input), sw = SavedTensor(weight), input_shape = input.sizes(),
                 weight_shape = weight.sizes(), params](const Tensor& g, const NeedsGrad& needs) {
                  Tensor grad_input, grad_weight, grad_bias;
                  if (needs[0]) {
                    grad_input = empty_like_shape(input_shape, g);
                    kernels::conv2d_grad_input(grad_input, g, sw.get(), params);
                  }
                  if (needs[1]) {
                    // Straight into DDP's bucket where it can (Note [A gradient written where it lands]).
                    grad_weight = autograd::gradient_output(1, weight_shape, g);
                    kernels::conv2d_grad_weight(grad_weight, g, si.get(), params);
                  }
                  if (needs[2]) grad_bias = sum(g, {0, 2, 3});
                  return TensorList{grad_input, grad_weight, grad_bias};
                });
}

// ---- pooling ----

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride,
                                                  Size2 padding, Size2 dilation, bool ceil_mode) {
  check_image_input("max_pool2d", input);
  if (input.dim() == 3) {
    auto [out, indices] =
        max_pool2d_with_indices(input.unsqueeze(0), kernel_size, stride, padding, dilation, ceil_mode);
    return {out.squeeze(0), indices.squeeze(0)};
  }
  const Pool2dWindow window{kernel_size, stride.value_or(kernel_size), padding, dilation};
  const Shape shape = pool_output_shape("max_pool2d", input, window, ceil_mode);
  Tensor out = empty_like_shape(shape, input);
  Tensor indices = empty(shape, {DType::i64, input.device()});
  kernels::max_pool2d(out, indices, input, window);
  // d out[o] / d input = 1 at the window's maximum, input position indices[o], and 0 elsewhere
  out = record("MaxPool2DWithIndicesBackward", out, {input},
               [si = SavedTensor(indices), input_shape = input.sizes(), window](const Tensor& g, const NeedsGrad&) {
                 Tensor grad_input = empty_like_shape(input_shape, g);
                 kernels::max_pool2d_backward(grad_input, g, si.get(), window);
                 return TensorList{grad_input};
               });
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  check_image_input("avg_pool2d", input);
  if (input.dim() == 3)
    return avg_pool2d(input.unsqueeze(0), kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        .squeeze(0);
  SG_CHECK(!divisor_override || *divisor_override != 0, "avg_pool2d: divisor_override must be non-zero");
  const Pool2dWindow window{kernel_size, stride.value_or(kernel_size), padding, 1};
  Tensor out = empty_like_shape(pool_output_shape("avg_pool2d", input, window, ceil_mode), input);
  kernels::avg_pool2d(out, input, window, count_include_pad, divisor_override);
  // d out[o] / d input = 1 / divisor(o) inside window o, 0 elsewhere
  return record(
      "AvgPool2DBackward", out, {input},
      [window, count_include_pad, divisor_override, input_shape = input.sizes()](const Tensor& g, const NeedsGrad&) {
        Tensor grad_input = empty_like_shape(input_shape, g);
        kernels::avg_pool2d_backward(grad_input, g, window, count_include_pad, divisor_override);
        return TensorList{grad_input};
      });
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  check_image_input("adaptive_avg_pool2d", input);
  if (input.dim() == 3) return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0);
  check_positive("adaptive_avg_pool2d", "output_size", output_size);
  SG_CHECK(input.size(1) > 0 && input.size(2) > 0 && input.size(3) > 0,
           "adaptive_avg_pool2d: expected non-empty channels, height and width, got input of shape ",
           shape_str(input.sizes()));
  Tensor out = empty_like_shape({input.size(0), input.size(1), output_size.h, output_size.w}, input);
  kernels::adaptive_avg_pool2d(out, input);
  // d out[o] / d input = 1 / (area of window o) inside window o, 0 elsewhere
  return record("AdaptiveAvgPool2DBackward", out, {input},
                [input_shape = input.sizes()](const Tensor& g, const NeedsGrad&) {
                  Tensor grad_input = empty_like_shape(input_shape, g);
                  kernels::adaptive_avg_pool2d_backward(grad_input, g);
                  return TensorList{grad_input};
                });
}

}  // namespace sg
