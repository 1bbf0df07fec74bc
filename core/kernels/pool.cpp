#include "core/kernels/pool.h"

// The device dispatch point for pooling (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window) {
  check_device_supported(out.device(), "max_pool2d");
  cpu::max_pool2d(out, indices, input, window);
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  check_device_supported(grad_input.device(), "max_pool2d_backward");
  cpu::max_pool2d_backward(grad_input, grad_out, indices);
}

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dWindow& window, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  check_device_supported(out.device(), "avg_pool2d");
  cpu::avg_pool2d(out, input, window, count_include_pad, divisor_override);
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dWindow& window,
                         bool count_include_pad, std::optional<int64_t> divisor_override) {
  check_device_supported(grad_input.device(), "avg_pool2d_backward");
  cpu::avg_pool2d_backward(grad_input, grad_out, window, count_include_pad, divisor_override);
}

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input) {
  check_device_supported(out.device(), "adaptive_avg_pool2d");
  cpu::adaptive_avg_pool2d(out, input);
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  check_device_supported(grad_input.device(), "adaptive_avg_pool2d_backward");
  cpu::adaptive_avg_pool2d_backward(grad_input, grad_out);
}

}  // namespace sg::kernels
