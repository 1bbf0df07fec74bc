#include "amp/scaler_diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "autograd/anomaly_mode.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"

namespace sg::amp {

namespace {

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

// A scale in full: 1048576 rather than the stream's 1.04858e+06 (every scale is an f32 value).
std::string scale_str(double scale) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", scale);
  return text;
}

}  // namespace

// Note [f16 underflow fraction]: the elements below f16's normal range, less the exact zeros.
// Counting over bool tensors sums in i64, so the count is exact for any size.
double f16_underflow_fraction(const Tensor& scaled_grad) {
  if (scaled_grad.numel() == 0) return 0.0;
  NoGradGuard no_grad;
  const double below_normal = sum(lt(abs(scaled_grad), kF16SmallestNormal)).item();
  const double zero = sum(eq(scaled_grad, 0.0)).item();
  return (below_normal - zero) / static_cast<double>(scaled_grad.numel());
}

std::string list_gradients(const std::vector<NonfiniteGradient>& gradients, size_t shown) {
  std::ostringstream text;
  for (size_t i = 0; i < gradients.size() && i < shown; ++i)
    text << (i ? ", " : "") << gradients[i].parameter << " (" << gradients[i].kind << ")";
  if (gradients.size() > shown) text << ", ... and " << gradients.size() - shown << " more";
  return text.str();
}

std::string SkippedStep::heading() const {
  return "iteration " + std::to_string(iteration) + " (scale " + scale_str(scale) + ")";
}

std::string SkippedStep::str() const {
  if (gradients.empty()) return heading() + ": this process's gradients were all finite; another rank's were not";
  return heading() + ": inf/NaN in the gradient" + (gradients.size() > 1 ? "s of " : " of ") +
         list_gradients(gradients);
}

double ParameterHealth::mean_underflow_fraction() const {
  return measured_iterations == 0 ? 0.0 : underflow_fraction_sum / static_cast<double>(measured_iterations);
}

void ScalerDiagnostics::add_parameter_names(const nn::Module& model) {
  for (const auto& [name, param] : model.named_parameters()) names_[param.impl()] = name;
}

std::string ScalerDiagnostics::name_of(const Tensor& param, size_t index, const std::string& optimizer_name) const {
  const auto named = names_.find(param.impl());
  if (named != names_.end()) return named->second;
  return "parameter " + std::to_string(index) + " of " + optimizer_name + " " + shape_str(param.sizes());
}

ParameterHealth& ScalerDiagnostics::health_of(const Tensor& param, size_t index, const std::string& optimizer_name) {
  const auto [entry, added] = health_index_.try_emplace(param.impl(), parameters_.size());
  if (added) parameters_.emplace_back().name = name_of(param, index, optimizer_name);
  return parameters_[entry->second];
}

void ScalerDiagnostics::measure_underflow(const Tensor& param, size_t index, const std::string& optimizer_name,
                                          const Tensor& scaled_grad) {
  ParameterHealth& health = health_of(param, index, optimizer_name);
  health.last_underflow_fraction = f16_underflow_fraction(scaled_grad);
  health.underflow_fraction_sum += health.last_underflow_fraction;
  ++health.measured_iterations;
}

void ScalerDiagnostics::record_if_nonfinite(const Tensor& param, size_t index, const std::string& optimizer_name) {
  // Unscaling multiplies by 1/S, which keeps inf inf and NaN NaN and cannot make a finite value
  // either: the unscaled gradient holds inf/NaN exactly where backward's did.
  if (const char* kind = autograd::nonfinite_kind(param.grad())) {
    pending_.push_back({name_of(param, index, optimizer_name), kind, param});
    health_of(param, index, optimizer_name).nonfinite_iterations.push_back(iterations_);
  }
}

void ScalerDiagnostics::end_iteration(bool skipped, double scale) {
  if (scale_history_.empty() || scale_history_.back().second != scale) scale_history_.emplace_back(iterations_, scale);
  if (skipped) skipped_steps_.push_back({iterations_, scale, std::move(pending_)});
  pending_.clear();
  ++iterations_;
}

std::map<std::string, double> ScalerDiagnostics::underflow_scalars() const {
  std::map<std::string, double> scalars;
  for (const ParameterHealth& health : parameters_)
    scalars["amp/underflow/" + health.name] = health.last_underflow_fraction;
  return scalars;
}

int64_t ParameterHealth::nonfinite_steps_from(int64_t iteration) const {
  return std::count_if(nonfinite_iterations.begin(), nonfinite_iterations.end(),
                       [iteration](int64_t skipped) { return skipped >= iteration; });
}

bool SaferPrecisionRule::picks(const ParameterHealth& health) const {
  return health.nonfinite_steps_from(settling_iterations) >= min_nonfinite_steps ||
         health.mean_underflow_fraction() >= min_mean_underflow_fraction;
}

std::vector<std::string> ScalerDiagnostics::safer_outside_f16(const SaferPrecisionRule& rule) const {
  std::vector<std::string> names;
  for (const ParameterHealth& health : parameters_)
    if (rule.picks(health)) names.push_back(health.name);
  return names;
}

std::string ScalerDiagnostics::summary(const SaferPrecisionRule& rule) const {
  std::ostringstream text;
  text << "amp diagnostics: " << iterations_ << " iterations, " << skipped_steps_.size() << " skipped; scale";
  for (const auto& [iteration, scale] : scale_history_)
    text << " " << scale_str(scale) << " (from iteration " << iteration << ")";
  text << "\nsafer in f32 or bf16 (inf/NaN gradients in >= " << rule.min_nonfinite_steps
       << " skipped steps from iteration " << rule.settling_iterations
       << " on, or a mean f16 underflow fraction >= " << percent(rule.min_mean_underflow_fraction) << "):";
  bool any = false;
  for (const ParameterHealth& health : parameters_) {
    if (!rule.picks(health)) continue;
    any = true;
    text << "\n  " << health.name << ": inf/NaN in " << health.nonfinite_steps_from(rule.settling_iterations)
         << " skipped steps from iteration " << rule.settling_iterations << " on, mean underflow fraction "
         << percent(health.mean_underflow_fraction()) << " over " << health.measured_iterations << " iterations";
  }
  if (!any) text << " none";
  return text.str();
}

}  // namespace sg::amp
