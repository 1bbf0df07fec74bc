#include "core/kernels/loss.h"

// The device dispatch point for the loss kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void cross_entropy(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& input,
                   const Tensor& target, const CrossEntropyArgs& args) {
  check_device_supported(target.device(), class_loss_name(args.scores));
  cpu::cross_entropy(out, log_sum_exp, total_weight, input, target, args);
}

void cross_entropy_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                            const Tensor& total_weight, const Tensor& input, const Tensor& target,
                            const CrossEntropyArgs& args) {
  check_device_supported(grad_input.device(), class_loss_name(args.scores));
  cpu::cross_entropy_backward(grad_input, grad_output, log_sum_exp, total_weight, input, target, args);
}

}  // namespace sg::kernels
