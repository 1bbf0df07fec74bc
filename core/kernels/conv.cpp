#include "core/kernels/conv.h"

// The device dispatch point for convolution (see core/kernels/pointwise.cpp). A CUDA build adds
// `if (is_cuda) return cuda::...` (cuDNN) here; the op front does not change.
namespace sg::kernels {

void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& params) {
  check_device_supported(out.device(), "conv2d");
  cpu::conv2d(out, input, weight, bias, params);
}

void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const Conv2dParams& params) {
  check_device_supported(grad_input.device(), "conv2d_grad_input");
  cpu::conv2d_grad_input(grad_input, grad_out, weight, params);
}

void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params) {
  check_device_supported(grad_weight.device(), "conv2d_grad_weight");
  cpu::conv2d_grad_weight(grad_weight, grad_out, input, params);
}

}  // namespace sg::kernels
