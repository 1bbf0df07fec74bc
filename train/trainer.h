#pragma once
// defines: dist::Trainer, TrainerHooks, TrainOutput, EvalPrediction — Hugging Face's Trainer on
//          top of dist::Accelerator: the whole training loop (AdamW, warm-up schedule,
//          accumulation, clipping, evaluation, logs, checkpoints, resume), unchanged on one process
//          or on many under sgrun (docs/trainer.md). The checkpoint folders it writes and resumes
//          from (and get_last_checkpoint) are train/checkpoint_folders.h's.
//
//   dist::TrainingArguments args{.output_dir = "out", .per_device_train_batch_size = 32,
//                                .num_train_epochs = 2, .learning_rate = 1e-3};
//   dist::Trainer trainer(model, args, train_set, test_set, {.compute_metrics = accuracy});
//   dist::TrainOutput result = trainer.train();   // out/checkpoint-<step>/, out/log.csv
//   dist::Metrics metrics = trainer.evaluate();   // {"eval_loss", "eval_accuracy", ...}
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "log/metrics_log.h"
#include "optim/adam.h"
#include "train/accelerator.h"
#include "train/checkpoint_folders.h"
#include "train/nonfinite_loss.h"
#include "train/trainer_callback.h"
#include "train/training_args.h"

namespace sg::dist {

// What compute_metrics receives: the model's outputs and the targets of every example of the
// eval set, each once (no padding), in the data set's order, on the CPU, alike on every process.
struct EvalPrediction {
  Tensor predictions = {};
  Tensor label_ids = {};
};

// The loss of a batch from the model's outputs and the batch's targets, as the mean over the
// batch (HF's compute_loss_func). The trainer runs the forward itself, model(batch.input), so that
// evaluation has the outputs for compute_metrics too.
using ComputeLoss = std::function<Tensor(const Tensor& outputs, const Tensor& labels)>;
using ComputeMetrics = std::function<Metrics(const EvalPrediction& prediction)>;

// The rest of HF Trainer's constructor arguments.
struct TrainerHooks {
  ComputeLoss compute_loss_func = {};   // empty: cross_entropy(outputs, labels)
  ComputeMetrics compute_metrics = {};  // its keys are reported with the "eval_" prefix
  std::vector<std::shared_ptr<TrainerCallback>> callbacks = {};
};

struct TrainOutput {
  int64_t global_step = 0;
  double training_loss = 0;  // mean loss per optimizer step over the whole run, resumed steps included
  Metrics metrics;           // train_runtime, train_samples_per_second, train_steps_per_second, train_loss, epoch
};

class Trainer {
public:
  // Checks `args` (an sg::Error names the field and its value), then sets up what train() needs:
  // an Accelerator (which joins the process group under a launcher), set_seed(args.seed), the
  // prepared model, a shuffled loader over train_dataset and one over eval_dataset (optional
  // unless an eval_strategy asks for it), AdamW and the schedule, output_dir and the loggers.
  Trainer(std::shared_ptr<nn::Module> model, TrainingArguments args, std::shared_ptr<const data::Dataset> train_dataset,
          std::shared_ptr<const data::Dataset> eval_dataset = nullptr, TrainerHooks hooks = {});
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains to state().max_steps, first restoring args.resume_from_checkpoint when it names one.
  TrainOutput train();
  // eval_loss (the mean loss over the eval set's examples), compute_metrics' results and
  // eval_runtime, eval_samples_per_second, eval_steps_per_second; logged as well.
  Metrics evaluate();
  void add_callback(std::shared_ptr<TrainerCallback> callback);

  const TrainingArguments& args() const { return args_; }
  const TrainerState& state() const { return state_; }
  nn::Module& model() { return accelerator_.unwrap_model(*model_); }  // without the DDP wrapper
  Accelerator& accelerator() { return accelerator_; }

private:
  template <typename Event, typename... Extra>
  void notify(Event event, const Extra&... extra) {
    for (const auto& callback : hooks_.callbacks) ((*callback).*event)(args_, state_, control_, extra...);
  }
  Tensor compute_loss(const Tensor& outputs, const Tensor& labels) const;
  void training_step(const data::Batch& batch);
  void optimizer_step();
  void step_flow();
  void epoch_flow();
  void maybe_log_save_evaluate();
  void log(Metrics logs);
  void write_csv(const Metrics& entry);
  void open_csv();
  void update_best_metric(const Metrics& metrics);
  void save_checkpoint();
  // Restores args.resume_from_checkpoint, if it names one; returns the batch to go on from.
  LoopPosition resume();
  void print_summary() const;
  Tensor scalar(double value) const;

  TrainingArguments args_;
  TrainerHooks hooks_;
  Accelerator accelerator_;
  std::shared_ptr<nn::Module> model_;  // prepared: DDP-wrapped on several processes
  std::optional<data::DataLoader> train_loader_, eval_loader_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  TrainerState state_;
  TrainerControl control_;
  std::optional<data::MetricsLog> csv_;
  int64_t updates_per_epoch_ = 0;
  LoopPosition position_;  // the next batch to train on
  // Note [The logged loss] in trainer.cpp.
  Tensor step_loss_, window_loss_;  // 0-dim f32 on the device
  int64_t step_micro_batches_ = 0, step_rows_ = 0, last_logged_step_ = 0;
  double total_loss_ = 0;
  std::optional<double> grad_norm_;  // of the last optimizer step
  NonfiniteLossGuard nonfinite_guard_;
};

}  // namespace sg::dist
