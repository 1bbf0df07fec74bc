#pragma once
// defines: amp::ScalerDiagnostics, SkippedStep, NonfiniteGradient, ParameterHealth, SaferPrecisionRule,
//          f16_underflow_fraction — what a GradScaler built with GradScalerOptions::diagnostics records:
//          which parameters' gradients held inf or NaN on each skipped step, each parameter's f16
//          underflow fraction, the scale's history, and which parameters would be safer out of f16.
//
// The scaler itself only sees an optimizer's tensors; the names come from the model:
//
//   amp::GradScaler scaler({.diagnostics = true});
//   scaler.add_parameter_names(*model);              // "fc2.weight" rather than "parameter 5"
//   ... the usual loop ...
//   const bool stepped = scaler.step(optimizer);
//   scaler.update();
//   if (!stepped) std::cout << scaler.diagnostics()->skipped_steps().back().str() << "\n";
//   ...
//   std::cout << scaler.diagnostics()->summary() << "\n";
//
// docs/amp.md ("Finding the layer that overflows") shows a report and how to read it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace sg::amp {

// Note [f16 underflow fraction]
// For one parameter and one iteration: the share of the elements e of its gradient *as backward
// produced it at the current scale S* (before unscale_ divides by S) with
//     0 < |e| < 2^-14,
// 2^-14 being f16's smallest normal number. Such a value, held in f16, is subnormal: it keeps fewer
// than 11 significant bits, and from |e| <= 2^-25 on it rounds to zero. The threshold is the normal
// range rather than the flush point 2^-25 on purpose: a gradient that came out of an f16 product
// (the weight of a Linear or a Conv2d under autocast) has already lost its flushed elements — they
// are zeros now, indistinguishable from true zeros — so counting only values that *would* flush
// would always say 0 for exactly the layers at risk; the subnormal band is the visible edge of what
// was lost. Exact zeros are not counted (a dead ReLU's weights, an unused embedding row). Where the
// gradient was computed in f32 (norm layers, parameters outside autocast) the fraction says how much
// of it f16 would have degraded or lost at this scale. Measured only with diagnostics on, before
// the unscale: a few elementwise passes over each gradient and two counts.
constexpr double kF16SmallestNormal = 6.103515625e-05;  // 2^-14
double f16_underflow_fraction(const Tensor& scaled_grad);

struct NonfiniteGradient {
  std::string parameter;  // its name from the model, or "parameter <i> of <Optimizer> [shape]" without names
  std::string kind;       // "inf" or "nan" (autograd::nonfinite_kind)
  Tensor handle;          // the parameter itself, so a caller can ask where its gradient came from
};

// One iteration whose step was skipped.
struct SkippedStep {
  int64_t iteration = 0;  // the scaler's iterations (update() calls) before this one
  double scale = 0;       // the scale this iteration's backward ran with
  // This process's gradients that held inf or NaN, last of the optimizer's parameters first: for an
  // optimizer over model.parameters() (registration order, roughly the forward's), the layer nearest
  // the output comes first. An inf that appears in backward spreads to the gradients of every layer
  // before it, so the first name is the likeliest place it began. Empty: every gradient here was
  // finite and the found-inf flag came from another rank (GradScalerOptions::agree_across_ranks).
  std::vector<NonfiniteGradient> gradients;

  // "iteration 3 (scale 65536): inf/NaN in the gradients of fc2.bias (inf), fc2.weight (nan)", or
  // "... : this process's gradients were all finite; another rank's were not".
  std::string str() const;
  std::string heading() const;  // "iteration 3 (scale 65536)"
};

// "fc2.bias (inf), fc2.weight (nan), ... and 12 more": at most `shown` names, in the given order.
std::string list_gradients(const std::vector<NonfiniteGradient>& gradients, size_t shown = 8);

struct ParameterHealth {
  std::string name;
  std::vector<int64_t> nonfinite_iterations;  // the skipped iterations whose gradient here held inf/NaN
  double last_underflow_fraction = 0;         // of the last iteration measured
  double underflow_fraction_sum = 0;
  int64_t measured_iterations = 0;
  double mean_underflow_fraction() const;
  int64_t nonfinite_steps_from(int64_t iteration) const;  // of nonfinite_iterations, those >= iteration
};

// Which parameters summary() calls safer in f32 or bf16: those whose gradient held inf/NaN in at least
// `min_nonfinite_steps` skipped iterations from `settling_iterations` on, or whose mean underflow
// fraction over the run is at least `min_mean_underflow_fraction`. The first iterations are left out
// because the scale starts deliberately too high and backs off, skipping steps in whatever layer has
// the largest gradients (usually the last), interleaved with clean ones; that says nothing about the
// layer. An overflow that keeps coming back once the scale has settled does.
struct SaferPrecisionRule {
  int64_t settling_iterations = 100;
  int64_t min_nonfinite_steps = 2;
  double min_mean_underflow_fraction = 0.1;

  bool picks(const ParameterHealth& health) const;
};

class ScalerDiagnostics {
public:
  // Names every parameter of `model` as named_parameters() does (a model wrapped in DDP: give the
  // module inside, or the names read "module.fc.weight"). Several models may be added.
  void add_parameter_names(const nn::Module& model);

  // GradScaler::unscale_'s calls, in this order in an iteration. `index` numbers the parameter in
  // `optimizer_name`'s all_params(), for a parameter without a name.
  void measure_underflow(const Tensor& param, size_t index, const std::string& optimizer_name,
                         const Tensor& scaled_grad);
  // Only when this process found inf/NaN: records `param` when its (unscaled) gradient holds any.
  void record_if_nonfinite(const Tensor& param, size_t index, const std::string& optimizer_name);
  // GradScaler::update's call: closes the iteration that ran with `scale`.
  void end_iteration(bool skipped, double scale);

  int64_t iterations() const { return iterations_; }
  const std::vector<SkippedStep>& skipped_steps() const { return skipped_steps_; }
  // (first iteration, scale) each time the scale changed, starting with the first iteration's.
  const std::vector<std::pair<int64_t, double>>& scale_history() const { return scale_history_; }
  // Every parameter measured so far, in the order they were first seen.
  const std::vector<ParameterHealth>& parameters() const { return parameters_; }
  // {"amp/underflow/<name>": last underflow fraction} for TensorBoard.
  std::map<std::string, double> underflow_scalars() const;
  // The names of the parameters the rule picks, in first-seen order.
  std::vector<std::string> safer_outside_f16(const SaferPrecisionRule& rule = {}) const;
  // A few lines: iterations, skipped steps, the scale history and the rule's picks with their reason.
  std::string summary(const SaferPrecisionRule& rule = {}) const;

private:
  std::string name_of(const Tensor& param, size_t index, const std::string& optimizer_name) const;
  ParameterHealth& health_of(const Tensor& param, size_t index, const std::string& optimizer_name);

  std::map<const TensorImpl*, std::string> names_;
  std::map<const TensorImpl*, size_t> health_index_;  // into parameters_
  std::vector<ParameterHealth> parameters_;
  std::vector<NonfiniteGradient> pending_;  // this iteration's, until end_iteration
  std::vector<SkippedStep> skipped_steps_;
  std::vector<std::pair<int64_t, double>> scale_history_;
  int64_t iterations_ = 0;
};

}  // namespace sg::amp
