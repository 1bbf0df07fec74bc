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
//
// Two things make "the loss" of a step more than one number. With gradient accumulation a step
// trains on several micro-batches: a NaN in any of them is in the summed gradients, so every
// micro-batch's loss is looked at (add_micro_batch_loss), not only the last one's. Under DDP each
// rank computes its own loss, and one bad batch makes one rank's loss NaN a step before the
// averaged NaN gradients reach the others' weights. A rank that stopped alone would leave the
// others waiting in their next collective until its timeout; so with an Accelerator of several
// processes, observe() gathers every rank's verdict (one small all-gather per step) and all of
// them count the streak alike, stop at the same step and name the ranks whose loss went bad.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace sg::dist {

class Accelerator;

class NonfiniteLossGuard {
public:
  // Stops after `max_steps` consecutive non-finite losses (0: never). `setting` names where that
  // was set, for the message: "--max-nonfinite-steps", "TrainingArguments.max_nonfinite_steps".
  // With `ranks` (the run's Accelerator) the processes agree on every step's verdict (Note
  // [Stopping on a non-finite loss]); every process must then construct the guard alike and call
  // observe() at the same steps.
  NonfiniteLossGuard(int max_steps, std::string setting, Accelerator* ranks = nullptr);

  // The loss of a micro-batch whose gradients accumulate into the next step without one.
  void add_micro_batch_loss(double loss);
  // The loss of optimizer step `step` (its last micro-batch's). Throws an sg::Error when the step
  // — any of its micro-batches, on any rank — is the max_steps-th non-finite one in a row, naming
  // the step where they began, the ranks, and the setting.
  void observe(double loss, int64_t step);

  // Throws an sg::Error naming `destination` when a parameter or buffer of `model` holds inf or
  // NaN after step `step`, before anything is written. Every process reaches the same answer when
  // their weights agree (as under DDP), so a collective save is refused on all of them.
  void check_before_saving(const nn::Module& model, const std::string& destination, int64_t step) const;

private:
  // Every rank's loss of this step, indexed by rank (one all-gather under an Accelerator of
  // several processes; this rank's alone otherwise).
  std::vector<double> losses_of_all_ranks(double loss) const;

  int max_steps_;
  std::string setting_;
  Accelerator* ranks_;
  std::optional<double> step_nonfinite_loss_;  // the current step's first micro-batch loss that was not finite
  int streak_ = 0;                             // consecutive non-finite losses up to the last step observed
  int64_t streak_start_ = 0;                   // the step the streak began at
  std::string streak_first_losses_;            // and its non-finite losses: "nan", or "rank 1: nan, rank 3: inf"
  std::optional<int64_t> first_nonfinite_;     // the first step of the run whose loss was not finite
};

}  // namespace sg::dist
