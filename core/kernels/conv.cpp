#include "core/kernels/conv.h"

#include "core/cpu/conv_kernels.h"
#include "core/cuda/conv_kernels.h"
#include "core/profiler.h"

// The device dispatch point for convolution (Note [Kernel dispatch] in core/device.h).
namespace sg::kernels {

void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params) {
  const profiler::RecordScope scope("conv2d", profiler::Category::conv, input, weight);
  if (runs_on_cuda(out.device(), "conv2d")) {
    if constexpr (kCudaBuild) return cuda::conv2d(out, input, weight, bias, params);
  }
  cpu::conv2d(out, input, weight, bias, params);
}

void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params) {
  const profiler::RecordScope scope("conv2d_grad_input", profiler::Category::conv, grad_out, weight);
  if (runs_on_cuda(grad_input.device(), "conv2d_grad_input")) {
    if constexpr (kCudaBuild) return cuda::conv2d_grad_input(grad_input, grad_out, weight, params);
  }
  cpu::conv2d_grad_input(grad_input, grad_out, weight, params);
}

void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params) {
  const profiler::RecordScope scope("conv2d_grad_weight", profiler::Category::conv, grad_out, input);
  if (runs_on_cuda(grad_weight.device(), "conv2d_grad_weight")) {
    if constexpr (kCudaBuild) return cuda::conv2d_grad_weight(grad_weight, grad_out, input, params);
  }
  cpu::conv2d_grad_weight(grad_weight, grad_out, input, params);
}

}  // namespace sg::kernels
