#include "core/kernels/softmax.h"

// The device dispatch point for softmax (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim) {
  check_device_supported(in.device(), softmax_name(kind));
  cpu::softmax(kind, out, in, dim);
}

void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim) {
  check_device_supported(out.device(), softmax_name(kind));
  cpu::softmax_backward(kind, grad_in, grad_out, out, dim);
}

}  // namespace sg::kernels
