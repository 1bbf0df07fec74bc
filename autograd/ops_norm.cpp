// Batch norm and layer norm: each front checks its operands, runs the fused forward kernel
// (which also returns the per-channel or per-row statistics) and records a backward that hands
// those statistics to the fused backward kernel.
#include "autograd/ops_norm.h"

#include <algorithm>

#include "autograd/autocast_policy.h"
#include "autograd/function.h"
#include "core/factory.h"
#include "core/kernels/norm.h"

namespace sg {

using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Statistics are kept in the kernels' compute type: f64 for f64 inputs, f32 otherwise.
DType statistics_dtype(DType input) { return input == DType::f64 ? DType::f64 : DType::f32; }

// An optional operand (weight, bias, running statistic): undefined, or `shape` on the input's
// dtype and device.
void check_operand(const Tensor& t, const char* what, const Shape& shape, const Tensor& input, const char* op_name) {
  if (!t.defined()) return;
  SG_CHECK(t.sizes() == shape, op_name, ": ", what, " of shape ", shape_str(t.sizes()), " does not fit input of shape ",
           shape_str(input.sizes()), " (expected ", shape_str(shape), ")");
  SG_CHECK(t.dtype() == input.dtype(), op_name, ": ", what, " is ", t.dtype(), " but input is ", input.dtype());
  SG_CHECK(t.device() == input.device(), op_name, ": ", what, " is on ", t.device(), " but input is on ",
           input.device());
}

// A gradient buffer of `shape` like x's dtype and device, when that gradient is wanted.
Tensor gradient_buffer(bool wanted, const Shape& shape, const Tensor& x) {
  return wanted ? empty(shape, {x.dtype(), x.device()}) : Tensor();
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  // The running statistics are updated in place, so they are never cast: they must be f32 already.
  if (const auto cast = autograd::autocast(autograd::AutocastOp::batch_norm, input, weight, bias))
    return batch_norm((*cast)[0], (*cast)[1], (*cast)[2], running_mean, running_var, training, momentum, eps);
  SG_CHECK(is_floating(input.dtype()), "batch_norm: expected a floating input, got ", input.dtype());
  SG_CHECK(input.dim() >= 2, "batch_norm: expected input of shape [N, C, ...], got ", shape_str(input.sizes()));
  const Shape channels{input.size(1)};
  check_operand(weight, "weight", channels, input, "batch_norm");
  check_operand(bias, "bias", channels, input, "batch_norm");
  check_operand(running_mean, "running_mean", channels, input, "batch_norm");
  check_operand(running_var, "running_var", channels, input, "batch_norm");
  SG_CHECK(running_mean.defined() == running_var.defined(),
           "batch_norm: running_mean and running_var must both be given or both be undefined");
  SG_CHECK(!running_mean.defined() || (running_mean.is_contiguous() && running_var.is_contiguous()),
           "batch_norm: running_mean and running_var must be contiguous (they are updated in place)");
  SG_CHECK(
      training || running_mean.defined(),
      "batch_norm: evaluation (training = false) normalises with running_mean and running_var, which are undefined");
  const int64_t values_per_channel = input.numel() / std::max<int64_t>(1, input.size(1));
  SG_CHECK(!training || values_per_channel > 1,
           "batch_norm: expected more than 1 value per channel when training, got input of shape ",
           shape_str(input.sizes()));

  Tensor out = empty(input.sizes(), {input.dtype(), input.device()});
  const Tensor mean = empty(channels, {statistics_dtype(input.dtype()), input.device()});
  const Tensor invstd = empty(channels, {statistics_dtype(input.dtype()), input.device()});
  kernels::batch_norm(out, mean, invstd, input, {weight, bias, running_mean, running_var, training, momentum, eps});
  // xhat = (x - mean) * invstd, y = xhat * w + b; per channel, with dy the output gradient:
  // dx = invstd * w * (dy - mean(dy) - xhat * mean(dy * xhat)) (training; eval: invstd * w * dy),
  // dw = sum(dy * xhat), db = sum(dy)
  return record("BatchNormBackward", out, {input, weight, bias},
                [sx = SavedTensor(input), sw = SavedTensor(weight), mean, invstd, training, channels](
                    const Tensor& g, const NeedsGrad& needs) {
                  const Tensor x = sx.get(), w = sw.get();
                  TensorList grads{gradient_buffer(needs[0], x.sizes(), x), gradient_buffer(needs[1], channels, x),
                                   gradient_buffer(needs[2], channels, x)};
                  kernels::batch_norm_backward(grads[0], grads[1], grads[2], g.to(x.dtype()), x, w, mean, invstd,
                                               training);
                  return grads;
                });
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::layer_norm, input, weight, bias))
    return layer_norm((*cast)[0], normalized_shape, (*cast)[1], (*cast)[2], eps);
  SG_CHECK(is_floating(input.dtype()), "layer_norm: expected a floating input, got ", input.dtype());
  const int64_t kept = input.dim() - static_cast<int64_t>(normalized_shape.size());
  SG_CHECK(!normalized_shape.empty() && kept >= 0 &&
               Shape(input.sizes().begin() + kept, input.sizes().end()) == normalized_shape,
           "layer_norm: input of shape ", shape_str(input.sizes()), " does not end with normalized_shape ",
           shape_str(normalized_shape));
  check_operand(weight, "weight", normalized_shape, input, "layer_norm");
  check_operand(bias, "bias", normalized_shape, input, "layer_norm");

  const Shape rows(input.sizes().begin(), input.sizes().begin() + kept);  // M rows of K elements
  const int64_t row_length = numel_of(normalized_shape);
  Tensor out = empty(input.sizes(), {input.dtype(), input.device()});
  const Tensor mean = empty(rows, {statistics_dtype(input.dtype()), input.device()});
  const Tensor rstd = empty(rows, {statistics_dtype(input.dtype()), input.device()});
  kernels::layer_norm(out, mean, rstd, input, weight, bias, row_length, eps);
  // xhat = (x - mean) * rstd per row, y = xhat * w + b; with dxhat = dy * w:
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dw = sum over rows of dy * xhat, db = sum of dy
  return record(
      "LayerNormBackward", out, {input, weight, bias},
      [sx = SavedTensor(input), sw = SavedTensor(weight), mean, rstd, row_length, normalized_shape](
          const Tensor& g, const NeedsGrad& needs) {
        const Tensor x = sx.get(), w = sw.get();
        TensorList grads{gradient_buffer(needs[0], x.sizes(), x), gradient_buffer(needs[1], normalized_shape, x),
                         gradient_buffer(needs[2], normalized_shape, x)};
        kernels::layer_norm_backward(grads[0], grads[1], grads[2], g.to(x.dtype()), x, w, mean, rstd, row_length);
        return grads;
      });
}

}  // namespace sg
