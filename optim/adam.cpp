#include "optim/adam.h"

#include <cmath>

#include "core/factory.h"
#include "core/kernels/optim.h"

namespace sg::optim {

template <typename Defaults>
void AdamFamilyOptions<Defaults>::check() const {
  SG_CHECK(std::isfinite(lr) && lr >= 0.0, "Adam/AdamW: invalid learning rate ", lr, " (lr must be finite and >= 0)");
  SG_CHECK(std::isfinite(eps) && eps >= 0.0, "Adam/AdamW: invalid eps ", eps);
  SG_CHECK(beta1 >= 0.0 && beta1 < 1.0, "Adam/AdamW: invalid beta1 ", beta1, " (must be in [0, 1))");
  SG_CHECK(beta2 >= 0.0 && beta2 < 1.0, "Adam/AdamW: invalid beta2 ", beta2, " (must be in [0, 1))");
  SG_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0, "Adam/AdamW: invalid weight_decay ", weight_decay);
}
template struct AdamFamilyOptions<AdamDefaults>;
template struct AdamFamilyOptions<AdamWDefaults>;

namespace {
// One Adam or AdamW update of one parameter; the state is created on its first step.
template <typename Options>
void adam_update(Tensor& param, const Tensor& grad, const Options& o, ParamState& state, bool decoupled) {
  if (!state.exp_avg.defined()) state.exp_avg = zeros_like(param);
  if (!state.exp_avg_sq.defined()) state.exp_avg_sq = zeros_like(param);
  if (o.amsgrad && !state.max_exp_avg_sq.defined()) state.max_exp_avg_sq = zeros_like(param);
  const AdamStep step{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, decoupled, o.amsgrad, o.maximize, state.step + 1};
  kernels::adam_step(param, grad, state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq, step);
  state.step = step.step;
}
}  // namespace

Adam::Adam(TensorList params, AdamOptions options) : OptimizerWithOptions("Adam", std::move(params), options) {}

void Adam::step() {
  for_each_param_with_grad([](auto&... args) { adam_update(args..., /*decoupled=*/false); });
}

AdamW::AdamW(TensorList params, AdamWOptions options) : OptimizerWithOptions("AdamW", std::move(params), options) {}

void AdamW::step() {
  for_each_param_with_grad([](auto&... args) { adam_update(args..., /*decoupled=*/true); });
}

}  // namespace sg::optim
