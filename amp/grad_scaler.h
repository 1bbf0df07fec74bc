#pragma once
// defines: amp::GradScaler, GradScalerOptions, GradScalerState, FoundInfAgreement — dynamic
//          loss scaling for f16 training, as torch.amp.GradScaler.
//
// Why: an f16 gradient below ~6e-8 rounds to zero, and many gradients are that small. Multiplying
// the loss by a large scale S multiplies every gradient by S too (backward is linear), lifting
// them into f16's range; unscale_ divides the f32 parameter gradients by S before the optimizer
// uses them. If S is too large, some gradient overflows to inf/NaN: that step is skipped and S
// is halved. After growth_interval clean steps in a row, S is doubled to try a larger one again.
// bf16 has f32's exponent range and needs no scaler.
//
//   amp::GradScaler scaler;
//   for (batch ...) {
//     optimizer.zero_grad();
//     Tensor loss;
//     { amp::AutocastGuard autocast(DType::f16); loss = F::cross_entropy(model(x), y); }
//     scaler.scale(loss).backward();
//     scaler.unscale_(optimizer);               // optional: only to clip or inspect true gradients
//     optim::clip_grad_norm_(params, 1.0);
//     bool stepped = scaler.step(optimizer);    // false: inf/NaN found, nothing was updated
//     scaler.update();
//   }
//
// docs/amp.md shows how the scale moves and when a step is skipped.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "amp/scaler_diagnostics.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace sg::amp {

// Note [Ranks agree on skipping a step]
// Under data parallelism every rank must skip the same f16 steps, or their parameters drift
// apart. Gradients that DDP averaged carry an inf or NaN of any rank to every rank already, so a
// scaler whose gradients all come out of DDP's synchronised backward agrees without a word, as
// PyTorch's does. Where gradients are local — parameters outside DDP, a step after no_sync, no
// DDP at all — the ranks must agree explicitly: the agreement receives this rank's one-element
// f32 found_inf flag (1: this rank found inf/NaN) and the gradients that were checked, and leaves
// in the flag a value > 0 if any rank's was 1 (an all-reduce with MAX). dist::Accelerator installs
// one (it knows which models it wrapped in DDP); without one the flag stays this rank's own.
using FoundInfAgreement = std::function<void(Tensor& found_inf, const TensorList& gradients)>;

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;                     // false: scale() returns the loss as is, step() just steps
  FoundInfAgreement agree_across_ranks{};  // called by unscale_; empty: this rank decides alone
  // Record which parameters' gradients held inf/NaN on a skipped step, each parameter's f16 underflow
  // fraction and the scale's history (amp/scaler_diagnostics.h). Off, nothing is measured or kept.
  bool diagnostics = false;
};

// What a checkpoint keeps (the fields of torch's GradScaler.state_dict(), plus the skip count).
// Apart from the options because it is the run's record, not its configuration: the options'
// `enabled` and `agree_across_ranks` belong to the process, not to the file. Its defaults are the
// options' own, so the two cannot disagree on a fresh scaler.
struct GradScalerState {
  double scale = GradScalerOptions{}.init_scale;
  double growth_factor = GradScalerOptions{}.growth_factor;
  double backoff_factor = GradScalerOptions{}.backoff_factor;
  int64_t growth_interval = GradScalerOptions{}.growth_interval;
  int64_t growth_tracker = 0;  // clean steps since the scale last changed
  int64_t skipped_steps = 0;

  // As JSON text, for a checkpoint's metadata (optim::save_checkpoint's `metadata`, key
  // "grad_scaler" by convention); from_json throws naming a missing or malformed field.
  std::string to_json() const;
  static GradScalerState from_json(const std::string& text);
};

class GradScaler {
public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale, computed in f32 (an f16 loss gives an f32 product, which cannot overflow).
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients of `optimizer`'s parameters by the scale in place and records whether
  // any was inf/NaN (on any rank, through options.agree_across_ranks). At most once per optimizer
  // between two update() calls, and before step(); f16 gradients are refused (keep parameters
  // in f32: their gradients are f32).
  void unscale_(optim::Optimizer& optimizer);
  // unscale_ (unless already done), then optimizer.step() if every gradient was finite. Returns
  // whether it stepped; a skipped step changes neither parameters nor optimizer state.
  bool step(optim::Optimizer& optimizer);
  // Moves the scale, once per iteration after step(): on inf/NaN scale *= backoff_factor and the
  // growth tracker restarts; otherwise the tracker counts one more clean step, and when it reaches
  // growth_interval, scale *= growth_factor (if that stays finite in f32) and the tracker restarts.
  // `new_scale` instead sets the scale directly. Throws if no optimizer was stepped or unscaled.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const;  // 1 when disabled
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t skipped_steps() const { return skipped_steps_; }  // updates that found inf/NaN
  bool is_enabled() const { return options_.enabled; }

  // With options.diagnostics: what was recorded (amp/scaler_diagnostics.h); null otherwise, or when
  // the scaler is disabled.
  const ScalerDiagnostics* diagnostics() const { return diagnostics_.get(); }
  // Lets the diagnostics name `model`'s parameters ("fc2.weight"); nothing without them.
  void add_parameter_names(const nn::Module& model);

  GradScalerState state_dict() const;
  void load_state_dict(const GradScalerState& state);  // throws on invalid factors or scale

private:
  void refuse_partial_gradients(const TensorList& params);
  enum class Stage { ready, unscaled, stepped };
  struct OptimizerRecord {
    Stage stage = Stage::ready;
    bool found_inf = false;
  };

  GradScalerOptions options_;
  float scale_;  // f32, as torch keeps it: growth stops where the scale would overflow f32
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  std::map<const optim::Optimizer*, OptimizerRecord> records_;  // optimizers seen since update()
  std::unique_ptr<ScalerDiagnostics> diagnostics_;              // only with options.diagnostics
};

}  // namespace sg::amp
