#pragma once
// defines: dist::TrainingArguments — what dist::Trainer trains with, named and defaulted as Hugging
//          Face's TrainingArguments (docs/trainer.md lists every field and the departures).
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sg::dist {

struct TrainingArguments {
  std::string output_dir = {};  // checkpoint-<step>/ folders and log.csv; required
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  double num_train_epochs = 3.0;  // a fraction trains that part of the last epoch
  int64_t max_steps = -1;         // optimizer steps; overrides num_train_epochs when positive

  // AdamW; weight decay spares biases and LayerNorm / RMSNorm weights, as HF's does.
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  // "linear", "cosine" or "constant" (alias "constant_with_warmup"), all after a linear warm-up
  // from 0 over warmup_steps, or, when that is 0, over ceil(warmup_ratio * total steps).
  std::string lr_scheduler_type = "linear";
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  int gradient_accumulation_steps = 1;
  double max_grad_norm = 1.0;          // 0: no clipping (and no grad_norm in the logs)
  std::string mixed_precision = "no";  // "no", "f16" or "bf16" (AcceleratorOptions::mixed_precision)
  bool use_cpu = false;                // otherwise the Accelerator's "auto" device
  // Ours: stop with an error after this many consecutive optimizer steps whose loss is inf or NaN
  // (0: never), as the apps' --max-nonfinite-steps (Note [Stopping on a non-finite loss] in
  // train/nonfinite_loss.h). HF trains on; a checkpoint is never written from inf or NaN weights.
  int max_nonfinite_steps = 5;
  // Ours, named like HF's ddp_* arguments: on several processes, compare the replicas every this
  // many optimizer steps and at each checkpoint (DDPOptions::check_replicas_every; 0: never).
  int ddp_check_replicas_every = 0;

  // "no", "steps" (every *_steps optimizer steps) or "epoch" (at the end of each epoch).
  std::string eval_strategy = "no";
  int64_t eval_steps = 0;  // 0: logging_steps
  std::string logging_strategy = "steps";
  int64_t logging_steps = 500;
  std::string save_strategy = "steps";
  int64_t save_steps = 500;
  int save_total_limit = 0;  // keep the newest this many checkpoints (and the best one); 0: all
  // An evaluate() key ("accuracy" or "eval_accuracy") whose best value TrainerState tracks;
  // greater_is_better defaults to true unless the name ends in "loss".
  std::string metric_for_best_model = {};
  std::optional<bool> greater_is_better = {};

  uint64_t seed = 42;  // dist::set_seed at construction, and the order of the training examples
  int dataloader_num_workers = 0;
  // Where logs go besides the console: "csv" (<output_dir>/log.csv), "tensorboard" (event files
  // in logging_dir).
  std::vector<std::string> report_to = {"csv"};
  std::string logging_dir = {};  // empty: <output_dir>/runs
  bool disable_tqdm = false;     // no progress bar
  // true: the newest checkpoint-<step> in output_dir (an error when there is none); a path: that
  // checkpoint folder; false: start afresh.
  std::variant<bool, std::string> resume_from_checkpoint = false;

  // Throws an sg::Error naming the first field that holds a value out of range, and the value.
  void check() const;
  // The warm-up in optimizer steps for a run of `total_steps` (HF's get_warmup_steps).
  int64_t get_warmup_steps(int64_t total_steps) const;
};

}  // namespace sg::dist
