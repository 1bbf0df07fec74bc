// CUDA batch norm through cuDNN's spatial batch normalization: cudnnBatchNormalizationForwardTraining,
// cudnnBatchNormalizationForwardInference and cudnnBatchNormalizationBackward. Shape letters as
// in core/kernels/norm.h: N batch, C channels, S positions per channel and sample.
//
// Note [Batch norm through cuDNN]
// - Shape: the input [N, C, ...] is read as a contiguous [N, C, S, 1]. cuDNN's SPATIAL mode
//   normalises each channel over N and S, which is BatchNorm1d/2d/3d's rule at every rank; a
//   [N, C] input is S = 1, and spatial over [N, C, 1, 1] is per channel over N, as BatchNorm1d.
// - Parameters: cuDNN keeps scale, bias and the running and saved statistics in float for 16-bit
//   data and in the data's type otherwise, i.e. in the statistics dtype of the kernel contract.
//   Our weight, bias and running statistics have the input's dtype, so 16-bit ones go through f32
//   copies (the running statistics are copied back after the update); a missing weight or bias
//   is ones or zeros.
// - Statistics: cuDNN's saved mean and saved inverse variance 1 / sqrt(var + eps) are the
//   kernel's mean and invstd; its running update is (1 - factor) * running + factor * batch with
//   the UNBIASED batch variance, so factor = momentum gives PyTorch's rule.
// - bf16 data is widened to f32 for cuDNN (PyTorch does not give bf16 batch norm to cuDNN
//   either); the result is rounded once, as the CPU kernel rounds its f32 math once.
// - Evaluation's backward is not cuDNN's, whose backward always differentiates through the
//   batch statistics: dx = invstd * w * dy and the two sums are pointwise kernels and
//   reductions in the statistics dtype (eval_backward).
#include "core/cuda/cudnn.h"
#include "core/cuda/norm_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"  // defines: kernels::sum

namespace sg::cuda {

namespace {

struct Channels {
  int64_t N = 0, C = 0, S = 1;
};

Channels channels_of(const Tensor& x) {
  Channels shape{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) shape.S *= x.size(d);
  return shape;
}

DType statistics_dtype(DType input) { return input == DType::f64 ? DType::f64 : DType::f32; }
DType cudnn_dtype(DType input) { return input == DType::bf16 ? DType::f32 : input; }

// `t` (contiguous) seen with `sizes` and `strides` (stride 0 broadcasts).
Tensor view_of(const Tensor& t, Shape sizes, Shape strides) {
  return Tensor(
      std::make_shared<TensorImpl>(t.storage(), t.storage_offset(), std::move(sizes), std::move(strides), t.dtype()));
}

// `t` contiguous and in `dtype`: t itself when it already is, else a converted copy.
Tensor contiguous_in(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return kernels::contiguous(t);
  Tensor copy = empty(t.sizes(), {dtype, t.device()});
  kernels::copy(copy, t);
  return copy;
}

// A [C] parameter in the statistics dtype: `t` converted, or `fill` everywhere when undefined.
Tensor parameter(const Tensor& t, double fill, int64_t C, DType dtype, Device device) {
  return t.defined() ? contiguous_in(t, dtype) : full({C}, fill, {dtype, device});
}

// Where a kernel writes a result that `target` (contiguous, or undefined when not wanted) must
// end up holding: target itself when its dtype is `dtype`, else a scratch tensor that
// deliver() copies into target.
Tensor output_in(const Tensor& target, const Shape& sizes, DType dtype, Device device) {
  return target.defined() && target.dtype() == dtype ? target : empty(sizes, {dtype, device});
}
void deliver(const Tensor& target, const Tensor& written) {
  if (target.defined() && !target.is_same(written)) kernels::copy(target, written);
}

// The factors cuDNN blends with (result = alpha * op + beta * result): double for f64 data,
// float otherwise. Always alpha = 1, beta = 0 here.
struct Blend {
  double one_f64 = 1, zero_f64 = 0;
  float one_f32 = 1, zero_f32 = 0;
  bool is_f64;
  explicit Blend(DType dtype) : is_f64(dtype == DType::f64) {}
  const void* one() const { return is_f64 ? static_cast<const void*>(&one_f64) : &one_f32; }
  const void* zero() const { return is_f64 ? static_cast<const void*>(&zero_f64) : &zero_f32; }
};

// The data and parameter descriptors of an input [N, C, S, 1] in `dtype`.
struct BatchNormDescriptors {
  TensorDescriptor data, parameters;
  BatchNormDescriptors(const Channels& shape, DType dtype, const char* op_name)
      : data(dtype, {shape.N, shape.C, shape.S, 1}, {shape.C * shape.S, shape.S, 1, 1}, op_name) {
    SG_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(parameters.get(), data.get(), CUDNN_BATCHNORM_SPATIAL));
  }
};

// [C] statistics seen as [N, C, S] (stride 0 across N and S).
Tensor per_channel(const Tensor& t, const Channels& shape) {
  return view_of(t, {shape.N, shape.C, shape.S}, {0, 1, 0});
}

// grad_input = invstd * w * dy, grad_weight = sum(dy * (x - mean)) * invstd, grad_bias = sum(dy),
// computed in the statistics dtype and rounded once into the outputs.
void eval_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                   const Tensor& input, const Tensor& weight, const Tensor& mean, const Tensor& invstd) {
  const Channels shape = channels_of(input);
  const DType stats = mean.dtype();
  const Device device = input.device();
  const Shape flat{shape.N, shape.C, shape.S}, channels{shape.C};
  const Tensor dy = contiguous_in(grad_out, stats);
  const Tensor dy_flat = view_of(dy, flat, contiguous_strides(flat));
  if (grad_input.defined()) {
    const Tensor scale = empty(channels, {stats, device});
    kernels::binary(BinaryOp::mul, scale, invstd, parameter(weight, 1.0, shape.C, stats, device));
    const Tensor dx = output_in(grad_input, input.sizes(), stats, device);
    kernels::binary(BinaryOp::mul, view_of(dx, flat, contiguous_strides(flat)), dy_flat, per_channel(scale, shape));
    deliver(grad_input, dx);
  }
  if (grad_bias.defined()) {
    const Tensor db = output_in(grad_bias, channels, stats, device);
    kernels::sum(db, dy_flat, {0, 2});
    deliver(grad_bias, db);
  }
  if (grad_weight.defined()) {
    const Tensor x = contiguous_in(input, stats);
    const Tensor products = empty(flat, {stats, device});  // dy * (x - mean)
    kernels::binary(BinaryOp::sub, products, view_of(x, flat, contiguous_strides(flat)), per_channel(mean, shape));
    kernels::binary(BinaryOp::mul, products, products, dy_flat);
    const Tensor dw = output_in(grad_weight, channels, stats, device);
    kernels::sum(dw, products, {0, 2});
    kernels::binary(BinaryOp::mul, dw, dw, invstd);
    deliver(grad_weight, dw);
  }
}

}  // namespace

void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input,
                const kernels::BatchNormArgs& args) {
  const Channels shape = channels_of(input);
  const DType stats = statistics_dtype(input.dtype()), data_dtype = cudnn_dtype(input.dtype());
  const Device device = input.device();
  const Tensor running_mean = args.running_mean.defined() ? contiguous_in(args.running_mean, stats) : Tensor();
  const Tensor running_var = args.running_var.defined() ? contiguous_in(args.running_var, stats) : Tensor();
  if (!args.training) {  // normalised by the running statistics, which the backward receives
    kernels::copy(mean, running_mean);
    kernels::binary(BinaryOp::add, invstd, running_var, full({}, args.eps, {stats, device}));
    kernels::unary(UnaryOp::rsqrt, invstd, invstd);
  }
  if (input.numel() == 0) return;
  const Tensor x = contiguous_in(input, data_dtype);
  const Tensor y = output_in(out, input.sizes(), data_dtype, device);
  const Tensor weight = parameter(args.weight, 1.0, shape.C, stats, device);
  const Tensor bias = parameter(args.bias, 0.0, shape.C, stats, device);
  const BatchNormDescriptors descriptors(shape, data_dtype, "batch_norm");
  const Blend blend(data_dtype);
  {
    CudnnHandle handle(device.index);
    if (args.training) {
      SG_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          handle.get(), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), descriptors.data.get(), x.raw_data(),
          descriptors.data.get(), y.raw_data(), descriptors.parameters.get(), weight.raw_data(), bias.raw_data(),
          args.momentum, running_mean.defined() ? running_mean.raw_data() : nullptr,
          running_var.defined() ? running_var.raw_data() : nullptr, args.eps, mean.raw_data(), invstd.raw_data()));
    } else {
      SG_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          handle.get(), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), descriptors.data.get(), x.raw_data(),
          descriptors.data.get(), y.raw_data(), descriptors.parameters.get(), weight.raw_data(), bias.raw_data(),
          running_mean.raw_data(), running_var.raw_data(), args.eps));
    }
  }
  deliver(out, y);
  if (args.training) {  // the f32 copies of 16-bit running statistics were updated, not the originals
    deliver(args.running_mean, running_mean);
    deliver(args.running_var, running_var);
  }
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training) {
  const Channels shape = channels_of(input);
  const DType stats = mean.dtype(), data_dtype = cudnn_dtype(input.dtype());
  const Device device = input.device();
  if (input.numel() == 0) {  // empty sums
    for (const Tensor& grad : {grad_weight, grad_bias})
      if (grad.defined()) kernels::fill(grad, 0.0);
    return;
  }
  if (!training) return eval_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, invstd);
  const Tensor x = contiguous_in(input, data_dtype), dy = contiguous_in(grad_out, data_dtype);
  const Tensor scale = parameter(weight, 1.0, shape.C, stats, device);
  // cuDNN writes all three gradients: the unwanted ones land in scratch tensors.
  const Tensor dx = output_in(grad_input, input.sizes(), data_dtype, device);
  const Tensor dw = output_in(grad_weight, {shape.C}, stats, device);
  const Tensor db = output_in(grad_bias, {shape.C}, stats, device);
  const BatchNormDescriptors descriptors(shape, data_dtype, "batch_norm_backward");
  const Blend blend(data_dtype);
  {
    CudnnHandle handle(device.index);
    // With the saved mean and invstd given, cuDNN does not recompute the variance, so epsilon
    // (which the backward contract does not carry) is unused; the minimum satisfies its check.
    SG_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        handle.get(), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), blend.one(), blend.zero(),
        descriptors.data.get(), x.raw_data(), descriptors.data.get(), dy.raw_data(), descriptors.data.get(),
        dx.raw_data(), descriptors.parameters.get(), scale.raw_data(), dw.raw_data(), db.raw_data(),
        CUDNN_BN_MIN_EPSILON, mean.raw_data(), invstd.raw_data()));
  }
  deliver(grad_input, dx);
  deliver(grad_weight, dw);
  deliver(grad_bias, db);
}

}  // namespace sg::cuda
