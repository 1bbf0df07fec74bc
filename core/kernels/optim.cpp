#include "core/kernels/optim.h"

#include "core/cpu/optim_kernels.h"
#include "core/cuda/optim_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the optimizer kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

namespace {
// The kernels read every operand as the parameter's element type and shape, so a state tensor
// left in another dtype (say, by a model converted after the optimizer's first step) would be
// read as the wrong bytes: refuse it here.
void check_like_param(const char* op, const Tensor& param, const char* name, const Tensor& t) {
  SG_CHECK(t.defined(), op, ": ", name, " is undefined");
  SG_CHECK(t.sizes() == param.sizes() && t.dtype() == param.dtype() && t.device() == param.device(), op, ": ", name,
           " is ", t.dtype(), " ", shape_str(t.sizes()), " on ", t.device(), ", the parameter ", param.dtype(), " ",
           shape_str(param.sizes()), " on ", param.device());
}
}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& step) {
  const profiler::RecordScope scope("adam_step", profiler::Category::optim, param);
  check_like_param("adam_step", param, "grad", grad);
  check_like_param("adam_step", param, "exp_avg", exp_avg);
  check_like_param("adam_step", param, "exp_avg_sq", exp_avg_sq);
  if (step.amsgrad) check_like_param("adam_step", param, "max_exp_avg_sq", max_exp_avg_sq);
  if (runs_on_cuda(param.device(), "adam_step")) {
    if constexpr (kCudaBuild) return cuda::adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
  }
  cpu::adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step) {
  const profiler::RecordScope scope("sgd_step", profiler::Category::optim, param);
  check_like_param("sgd_step", param, "grad", grad);
  if (step.momentum != 0.0) check_like_param("sgd_step", param, "momentum_buffer", momentum_buffer);
  if (runs_on_cuda(param.device(), "sgd_step")) {
    if constexpr (kCudaBuild) return cuda::sgd_step(param, grad, momentum_buffer, step);
  }
  cpu::sgd_step(param, grad, momentum_buffer, step);
}

}  // namespace sg::kernels
