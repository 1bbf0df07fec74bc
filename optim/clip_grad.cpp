#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops_index.h"
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

// Note [One wait for the norm]
// The total norm is the norm of the vector of per-gradient norms. Each of those is computed where
// its gradient lies and they are combined there too, so only the final value is read back: a GPU
// run then waits for the device once per clipping, where reading each gradient's norm waited once
// per gradient (gpt-mini's step spent 89 waits of ~48 us on an H200 that way). The norms are
// widened to f64 before they are combined, as the host once added them in double.
Tensor summed_norm_powers(const TensorList& grads, double norm_type) {
  SG_CHECK(!grads.empty(), "summed_norm_powers: no gradients");
  const Device device = grads.front().device();
  TensorList norms;
  norms.reserve(grads.size());
  for (const Tensor& grad : grads) norms.push_back(grad.norm(norm_type).to(DType::f64).to(device));
  const Tensor all = stack(norms);
  return std::isinf(norm_type) ? all.max() : all.pow(norm_type).sum();
}

double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  autograd::refuse_partial_gradients(params, "clip_grad_norm_",
                                     "so a norm taken here would mix averages with local sums. Clip with "
                                     "ZeroRedundancyOptimizer::clip_grad_norm_ or Accelerator::clip_grad_norm_, "
                                     "which add up each owner's share");
  TensorList grads = defined_grads(params);
  if (grads.empty()) return 0.0;

  const double combined = summed_norm_powers(grads, norm_type).item();
  const double total_norm = std::isinf(norm_type) ? combined : std::pow(combined, 1.0 / norm_type);

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
