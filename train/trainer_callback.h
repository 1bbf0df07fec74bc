#pragma once
// defines: dist::TrainerState, TrainerControl, TrainerCallback, Metrics — what dist::Trainer
//          tells callbacks at each event of training and how they steer it (HF's
//          trainer_callback.py).
//
//   struct StopAt : dist::TrainerCallback {
//     void on_step_end(const dist::TrainingArguments&, const dist::TrainerState& state,
//                      dist::TrainerControl& control) override {
//       if (state.global_step == 100) control.should_training_stop = true;
//     }
//   };
//
// Callbacks run on every process, with the same state on each: a decision taken in one must be
// taken alike on all (the ranks train in lockstep).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/training_args.h"

namespace sg::dist {

using Metrics = std::map<std::string, double>;

struct TrainerState {
  double epoch = 0;         // epochs done, with the fraction of the current one (1.5: half way through the second)
  int64_t global_step = 0;  // optimizer steps taken
  int64_t max_steps = 0;
  int64_t num_train_epochs = 0;
  // Every log: training logs (loss, grad_norm, learning_rate), evaluate()'s metrics and the
  // final train_* figures, each with "epoch" and "step".
  std::vector<Metrics> log_history = {};
  // With TrainingArguments::metric_for_best_model: its best value so far, the step it was
  // reached at, and the checkpoint saved then (save_total_limit never removes that one).
  std::optional<double> best_metric = {};
  std::optional<int64_t> best_global_step = {};
  std::string best_model_checkpoint = {};
  // The processes training (not in HF's): a checkpoint resumed on another number of processes
  // continues at the same example (Note [Resuming on another world size] in
  // train/loader_tracker.h). 0 in a checkpoint saved before it was recorded.
  int world_size = 1;
  bool is_world_process_zero = true;  // the main process (not saved)

  // HF's trainer_state.json (with world_size), readable by from_json: an sg::Error names a field
  // that is missing, or a count or step that is negative.
  std::string to_json() const;
  static TrainerState from_json(const std::string& text);
};

// Set by the trainer from the strategies (and should_training_stop at max_steps) before the
// callbacks hear of a step or an epoch's end; a callback may change them. should_log,
// should_evaluate and should_save are cleared once acted on.
struct TrainerControl {
  bool should_training_stop = false;
  bool should_epoch_stop = false;
  bool should_save = false;
  bool should_evaluate = false;
  bool should_log = false;
};

// Every hook does nothing unless overridden. on_step_end follows each optimizer step (not each
// micro-batch); on_log, on_evaluate and on_save follow the step or epoch end that asked for them.
class TrainerCallback {
public:
  virtual ~TrainerCallback() = default;
  virtual void on_train_begin(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_epoch_begin(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_step_end(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_log(const TrainingArguments&, const TrainerState&, TrainerControl&, const Metrics& /*logs*/) {}
  virtual void on_evaluate(const TrainingArguments&, const TrainerState&, TrainerControl&, const Metrics& /*metrics*/) {
  }
  virtual void on_save(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_epoch_end(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
  virtual void on_train_end(const TrainingArguments&, const TrainerState&, TrainerControl&) {}
};

}  // namespace sg::dist
