#pragma once
// defines: dist::NonfiniteLossGuard — what every training loop here (train_cnn, train_resnet,
//          train_gpt, dist::Trainer) does when its loss stops being a number: it stops after a
//          streak of inf or NaN losses, and it never writes a snapshot or checkpoint from weights
//          that hold inf or NaN.
//
// Note [Stopping on a non-finite loss]
// An inf or NaN *gradient* with a finite loss is f16's overflow, which the loss scaler handles by
// skipping the step; such a step does not count here. An inf or NaN *loss* is the forward itself
// failing (an lr that diverged, a bad batch): no scale fixes it, and without a scaler the step
// has just written NaN into the weights. One such loss can pass (under f16 the scaler skips its
// step and the weights stay as they were), but max_steps of them in a row mean the run is lost,
// so observe() throws, naming the step where the streak began. Training on regardless (max_steps
// 0) is the caller's choice; a file is not: a snapshot or checkpoint is what a restarted run
// resumes from and what a user keeps, so check_before_saving() refuses to replace it with inf or
// NaN weights, whatever max_steps is, and the file already there stays as it was.
#include <cstdint>
#include <optional>
#include <string>

#include "nn/module.h"

namespace sg::dist {

class NonfiniteLossGuard {
public:
  // Stops after `max_steps` consecutive non-finite losses (0: never). `setting` names where that
  // was set, for the message: "--max-nonfinite-steps", "TrainingArguments.max_nonfinite_steps".
  NonfiniteLossGuard(int max_steps, std::string setting);

  // The loss of optimizer step `step`. Throws an sg::Error when it is the max_steps-th non-finite
  // loss in a row, naming the step where they began and the setting.
  void observe(double loss, int64_t step);

  // Throws an sg::Error naming `destination` when a parameter or buffer of `model` holds inf or
  // NaN after step `step`, before anything is written. Every process reaches the same answer when
  // their weights agree (as under DDP), so a collective save is refused on all of them.
  void check_before_saving(const nn::Module& model, const std::string& destination, int64_t step) const;

private:
  int max_steps_;
  std::string setting_;
  int streak_ = 0;                          // consecutive non-finite losses up to the last step observed
  int64_t streak_start_ = 0;                // the step the streak began at
  double streak_first_loss_ = 0;            // and its loss (inf or NaN)
  std::optional<int64_t> first_nonfinite_;  // the first step of the run whose loss was not finite
};

}  // namespace sg::dist
