#include "core/kernels/loss.h"

#include "core/cpu/loss_kernels.h"
#include "core/cuda/loss_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the loss kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void cross_entropy(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& input,
                   const Tensor& target, const CrossEntropyArgs& args) {
  const profiler::RecordScope scope(class_loss_name(args.scores), profiler::Category::loss, input, target);
  if (runs_on_cuda(target.device(), class_loss_name(args.scores))) {
    if constexpr (kCudaBuild) return cuda::cross_entropy(out, log_sum_exp, total_weight, input, target, args);
  }
  cpu::cross_entropy(out, log_sum_exp, total_weight, input, target, args);
}

void cross_entropy_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                            const Tensor& total_weight, const Tensor& input, const Tensor& target,
                            const CrossEntropyArgs& args) {
  const profiler::RecordScope scope("cross_entropy_backward", profiler::Category::loss, grad_output, input);
  if (runs_on_cuda(grad_input.device(), class_loss_name(args.scores))) {
    if constexpr (kCudaBuild)
      return cuda::cross_entropy_backward(grad_input, grad_output, log_sum_exp, total_weight, input, target, args);
  }
  cpu::cross_entropy_backward(grad_input, grad_output, log_sum_exp, total_weight, input, target, args);
}

}  // namespace sg::kernels
