#include "core/kernels/norm.h"

#include "core/cpu/norm_kernels.h"
#include "core/cuda/norm_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the normalisation kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input,
                const BatchNormArgs& args) {
  const profiler::RecordScope scope("batch_norm", profiler::Category::norm, input);
  if (runs_on_cuda(input.device(), "batch_norm")) {
    if constexpr (kCudaBuild) return cuda::batch_norm(out, mean, invstd, input, args);
  }
  cpu::batch_norm(out, mean, invstd, input, args);
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training) {
  const profiler::RecordScope scope("batch_norm_backward", profiler::Category::norm, grad_out, input);
  if (runs_on_cuda(input.device(), "batch_norm_backward")) {
    if constexpr (kCudaBuild)
      return cuda::batch_norm_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, invstd,
                                       training);
  }
  cpu::batch_norm_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, invstd, training);
}

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, int64_t row_length, double eps) {
  const profiler::RecordScope scope("layer_norm", profiler::Category::norm, input);
  if (runs_on_cuda(input.device(), "layer_norm")) {
    if constexpr (kCudaBuild) return cuda::layer_norm(out, mean, rstd, input, weight, bias, row_length, eps);
  }
  cpu::layer_norm(out, mean, rstd, input, weight, bias, row_length, eps);
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, int64_t row_length) {
  const profiler::RecordScope scope("layer_norm_backward", profiler::Category::norm, grad_out, input);
  if (runs_on_cuda(input.device(), "layer_norm_backward")) {
    if constexpr (kCudaBuild)
      return cuda::layer_norm_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, rstd,
                                       row_length);
  }
  cpu::layer_norm_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, rstd, row_length);
}

}  // namespace sg::kernels
