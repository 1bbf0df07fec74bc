#include "amp/grad_scaler.h"

#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops_pointwise.h"
#include "core/factory.h"
#include "core/kernels/amp.h"

namespace sg::amp {

namespace {

void check_factors(const char* where, double scale, double growth_factor, double backoff_factor,
                   int64_t growth_interval) {
  SG_CHECK(std::isfinite(scale) && scale > 0, where, ": the scale must be positive and finite, got ", scale);
  SG_CHECK(growth_factor > 1.0, where, ": growth_factor must be > 1, got ", growth_factor);
  SG_CHECK(backoff_factor > 0.0 && backoff_factor < 1.0, where, ": backoff_factor must be in (0, 1), got ",
           backoff_factor);
  SG_CHECK(growth_interval > 0, where, ": growth_interval must be positive, got ", growth_interval);
}

}  // namespace

// ---- state ----

std::string GradScalerState::to_json() const {
  return nlohmann::json{{"scale", scale},
                        {"growth_factor", growth_factor},
                        {"backoff_factor", backoff_factor},
                        {"growth_interval", growth_interval},
                        {"growth_tracker", growth_tracker},
                        {"skipped_steps", skipped_steps}}
      .dump();
}

GradScalerState GradScalerState::from_json(const std::string& text) {
  try {
    const nlohmann::json value = nlohmann::json::parse(text);
    return {value.at("scale").get<double>(),           value.at("growth_factor").get<double>(),
            value.at("backoff_factor").get<double>(),  value.at("growth_interval").get<int64_t>(),
            value.at("growth_tracker").get<int64_t>(), value.at("skipped_steps").get<int64_t>()};
  } catch (const nlohmann::json::exception& error) {
    SG_FAIL("GradScalerState::from_json: not a saved GradScaler state (", error.what(), "): ", text);
  }
}

// ---- the scaler ----

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(static_cast<float>(options.init_scale)) {
  check_factors("GradScaler", options.init_scale, options.growth_factor, options.backoff_factor,
                options.growth_interval);
  if (options_.enabled && options_.diagnostics) diagnostics_ = std::make_unique<ScalerDiagnostics>();
}

void GradScaler::add_parameter_names(const nn::Module& model) {
  if (diagnostics_) diagnostics_->add_parameter_names(model);
}

double GradScaler::get_scale() const { return options_.enabled ? scale_ : 1.0; }

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  SG_CHECK(is_floating(loss.dtype()), "GradScaler::scale: expected a floating loss, got ", loss.dtype());
  return loss * full({}, scale_, {DType::f32, loss.device()});
}

// A gradient that holds only this rank's part of its value (ZeRO-2) can be finite here and not on
// its owner: each rank deciding alone could then skip a step the others take, and the ranks would
// part ways for good. Checked before any gradient is touched.
void GradScaler::refuse_partial_gradients(const TensorList& params) {
  autograd::refuse_partial_gradients(
      params, "GradScaler::unscale_",
      "so whether it is finite can differ from rank to rank, and the ranks would disagree on skipping the step. Give "
      "the scaler an agreement (GradScalerOptions::agree_across_ranks), or train through the Accelerator, which does");
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  OptimizerRecord& record = records_[&optimizer];
  SG_CHECK(record.stage != Stage::unscaled, "GradScaler::unscale_: already called on this ", optimizer.type_name(),
           " optimizer since the last update() (once per step: the gradients are already unscaled)");
  SG_CHECK(record.stage != Stage::stepped, "GradScaler::unscale_: called after step() on this ", optimizer.type_name(),
           " optimizer; call it before step(), once per iteration, then update()");
  // 1/scale in double, rounded once to f32, as torch does (for a power-of-two scale it is exact).
  const double inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  NoGradGuard no_grad;
  // One flag per device the gradients live on: the kernel writes it where it runs, and the host
  // reads each flag once, after every gradient of that device was checked.
  std::vector<Tensor> flags;
  const auto flag_on = [&flags](Device device) -> const Tensor& {
    for (const Tensor& flag : flags)
      if (flag.device() == device) return flag;
    return flags.emplace_back(zeros({1}, {DType::f32, device}));
  };
  const TensorList params = optimizer.all_params();
  if (!options_.agree_across_ranks) refuse_partial_gradients(params);
  TensorList checked;
  for (size_t index = 0; index < params.size(); ++index) {
    const Tensor& param = params[index];
    const Tensor& grad = param.grad();
    if (!grad.defined()) continue;
    checked.push_back(grad);
    SG_CHECK(grad.dtype() != DType::f16, "GradScaler::unscale_: a parameter of shape ", shape_str(param.sizes()),
             " has an f16 gradient; unscaled f16 gradients underflow, which the scaler exists to prevent. Keep the "
             "parameters in f32 and let autocast cast them (their gradients are then f32)");
    if (diagnostics_) diagnostics_->measure_underflow(param, index, optimizer.type_name(), grad);
    kernels::non_finite_check_and_unscale_(grad, flag_on(grad.device()), inv_scale);
  }
  Tensor found_inf = zeros({1}, {DType::f32});
  for (const Tensor& flag : flags)
    if (flag.item<float>() > 0) found_inf.fill_(1.0);
  // Only on an overflow, and only with diagnostics: one more look at each gradient, to name them,
  // last parameter first (SkippedStep::gradients says why).
  if (diagnostics_ && found_inf.item<float>() > 0)
    for (size_t index = params.size(); index-- > 0;)
      if (params[index].grad().defined())
        diagnostics_->record_if_nonfinite(params[index], index, optimizer.type_name());
  if (options_.agree_across_ranks)
    options_.agree_across_ranks(found_inf, checked);  // Note [Ranks agree on skipping a step]
  record.found_inf = found_inf.item<float>() > 0;
  record.stage = Stage::unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  SG_CHECK(records_[&optimizer].stage != Stage::stepped, "GradScaler::step: already called on this ",
           optimizer.type_name(), " optimizer since the last update()");
  if (records_[&optimizer].stage == Stage::ready) unscale_(optimizer);
  OptimizerRecord& record = records_[&optimizer];
  record.stage = Stage::stepped;
  if (record.found_inf) return false;  // the parameters and the optimizer's state stay as they were
  optimizer.step();
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  bool found_inf = false;
  for (const auto& [optimizer, record] : records_) found_inf = found_inf || record.found_inf;
  if (new_scale) {
    check_factors("GradScaler::update", *new_scale, options_.growth_factor, options_.backoff_factor,
                  options_.growth_interval);
  } else {
    SG_CHECK(!records_.empty(),
             "GradScaler::update: no inf checks were recorded since the last update(); call "
             "step(optimizer) (or unscale_) first");
  }
  if (diagnostics_) diagnostics_->end_iteration(found_inf, scale_);  // the scale this iteration ran with
  if (new_scale) {
    scale_ = static_cast<float>(*new_scale);
  } else if (found_inf) {  // torch's _amp_update_scale_
    scale_ = static_cast<float>(scale_ * options_.backoff_factor);
    growth_tracker_ = 0;
    ++skipped_steps_;
  } else if (growth_tracker_ + 1 == options_.growth_interval) {
    const float grown = static_cast<float>(scale_ * options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  records_.clear();
}

GradScalerState GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {scale_,          options_.growth_factor, options_.backoff_factor, options_.growth_interval,
          growth_tracker_, skipped_steps_};
}

void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!options_.enabled) return;  // as torch: a disabled scaler has no state to restore
  check_factors("GradScaler::load_state_dict", state.scale, state.growth_factor, state.backoff_factor,
                state.growth_interval);
  SG_CHECK(state.growth_tracker >= 0 && state.growth_tracker < state.growth_interval,
           "GradScaler::load_state_dict: growth_tracker must be in [0, growth_interval = ", state.growth_interval,
           "), got ", state.growth_tracker);
  SG_CHECK(state.skipped_steps >= 0, "GradScaler::load_state_dict: skipped_steps must be >= 0, got ",
           state.skipped_steps);
  scale_ = static_cast<float>(state.scale);
  options_.growth_factor = state.growth_factor;
  options_.backoff_factor = state.backoff_factor;
  options_.growth_interval = state.growth_interval;
  growth_tracker_ = state.growth_tracker;
  skipped_steps_ = state.skipped_steps;
}

}  // namespace sg::amp
