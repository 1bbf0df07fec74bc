#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops_reduce.h"

namespace sg::optim {

namespace {
TensorList defined_grads(const TensorList& params) {
  TensorList grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}
}  // namespace

double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  TensorList grads = defined_grads(params);
  if (grads.empty()) return 0.0;

  // The norm of the vector of per-gradient norms is the norm of all elements together.
  double total_norm = 0.0;
  for (const Tensor& grad : grads) {
    const double norm = grad.norm(norm_type).item();
    if (std::isinf(norm_type)) total_norm = std::isnan(norm) || norm > total_norm ? norm : total_norm;
    else total_norm += std::pow(norm, norm_type);
    if (std::isnan(total_norm)) break;
  }
  if (!std::isinf(norm_type)) total_norm = std::pow(total_norm, 1.0 / norm_type);

  SG_CHECK(!error_if_nonfinite || std::isfinite(total_norm), "clip_grad_norm_: the total norm of order ", norm_type,
           " of the gradients is ", total_norm, ", so they cannot be clipped; pass error_if_nonfinite=false to ",
           "multiply them anyway");
  const double clip_coef = max_norm / (total_norm + 1e-6);
  const double clip_coef_clamped = clip_coef > 1.0 ? 1.0 : clip_coef;  // NaN stays NaN, as torch.clamp
  for (Tensor& grad : grads) grad.mul_(clip_coef_clamped);
  return total_norm;
}

void clip_grad_value_(const TensorList& params, double clip_value) {
  NoGradGuard no_grad;
  for (Tensor& grad : defined_grads(params)) grad.clamp_(-clip_value, clip_value);
}

}  // namespace sg::optim
