#include "backward_compare.h"

#include "helpers.h"

namespace sg::test {

void check_forward_backward_match_cpu(const std::function<Tensor(const TensorList&)>& op, const TensorList& inputs,
                                      double output_tolerance, double gradient_tolerance) {
  TensorList cpu_leaves, gpu_leaves;
  for (const Tensor& t : inputs) {
    cpu_leaves.push_back(t.defined() ? Tensor(t.detach().requires_grad_()) : Tensor());
    gpu_leaves.push_back(t.defined() ? Tensor(t.detach().to(gpu()).requires_grad_()) : Tensor());
  }
  const Tensor cpu_out = op(cpu_leaves), gpu_out = op(gpu_leaves);
  REQUIRE(gpu_out.device() == gpu());
  check_matches_cpu(gpu_out.detach(), cpu_out.detach(), output_tolerance);
  const Tensor g = randn(cpu_out.sizes(), {}, &rng()).to(cpu_out.dtype());
  (cpu_out * g).sum().backward();
  (gpu_out * g.to(gpu())).sum().backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    CAPTURE(i);
    REQUIRE(gpu_leaves[i].grad().defined());
    check_matches_cpu(gpu_leaves[i].grad(), cpu_leaves[i].grad(), gradient_tolerance);
  }
}

}  // namespace sg::test
