#include "train/training_args.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/error.h"

namespace sg::dist {

namespace {

template <typename Value>
void require(bool ok, const char* field, const Value& value, const char* expectation) {
  SG_CHECK(ok, "TrainingArguments: ", field, " must be ", expectation, ", got ", value);
}

std::string quoted(const std::string& text) { return "\"" + text + "\""; }

void require_one_of(const char* field, const std::string& value, std::initializer_list<const char*> choices) {
  std::string listed;
  for (const char* choice : choices) listed += (listed.empty() ? "" : ", ") + quoted(choice);
  const bool found = std::any_of(choices.begin(), choices.end(), [&](const char* choice) { return value == choice; });
  require(found, field, quoted(value), ("one of " + listed).c_str());
}

void require_interval_steps(const char* field, int64_t steps, const std::string& strategy) {
  require(strategy != "steps" || steps >= 1, field, steps, "at least 1 when its strategy is \"steps\"");
}

}  // namespace

void TrainingArguments::check() const {
  SG_CHECK(!output_dir.empty(), "TrainingArguments: output_dir must be set: checkpoints and log.csv are written there");
  require(per_device_train_batch_size >= 1, "per_device_train_batch_size", per_device_train_batch_size, "at least 1");
  require(per_device_eval_batch_size >= 1, "per_device_eval_batch_size", per_device_eval_batch_size, "at least 1");
  require(max_steps == -1 || max_steps >= 1, "max_steps", max_steps, "-1 (train num_train_epochs) or at least 1");
  require(max_steps >= 1 || (std::isfinite(num_train_epochs) && num_train_epochs > 0), "num_train_epochs",
          num_train_epochs, "positive unless max_steps is set");
  require(std::isfinite(learning_rate) && learning_rate >= 0, "learning_rate", learning_rate, "finite and >= 0");
  require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay", weight_decay, "finite and >= 0");
  require(adam_beta1 >= 0 && adam_beta1 < 1, "adam_beta1", adam_beta1, "in [0, 1)");
  require(adam_beta2 >= 0 && adam_beta2 < 1, "adam_beta2", adam_beta2, "in [0, 1)");
  require(std::isfinite(adam_epsilon) && adam_epsilon >= 0, "adam_epsilon", adam_epsilon, "finite and >= 0");
  require_one_of("lr_scheduler_type", lr_scheduler_type, {"linear", "cosine", "constant", "constant_with_warmup"});
  require(warmup_steps >= 0, "warmup_steps", warmup_steps, ">= 0");
  require(warmup_ratio >= 0 && warmup_ratio <= 1, "warmup_ratio", warmup_ratio, "in [0, 1]");
  require(gradient_accumulation_steps >= 1, "gradient_accumulation_steps", gradient_accumulation_steps, "at least 1");
  require(std::isfinite(max_grad_norm) && max_grad_norm >= 0, "max_grad_norm", max_grad_norm,
          "finite and >= 0 (0: no clipping)");
  require(max_nonfinite_steps >= 0, "max_nonfinite_steps", max_nonfinite_steps, ">= 0 (0: never stop)");
  require(ddp_check_replicas_every >= 0, "ddp_check_replicas_every", ddp_check_replicas_every, ">= 0 (0: never)");
  require_one_of("mixed_precision", mixed_precision, {"no", "f16", "bf16"});
  require_one_of("eval_strategy", eval_strategy, {"no", "steps", "epoch"});
  require_one_of("logging_strategy", logging_strategy, {"no", "steps", "epoch"});
  require_one_of("save_strategy", save_strategy, {"no", "steps", "epoch"});
  require(eval_steps >= 0, "eval_steps", eval_steps, ">= 0 (0: logging_steps)");
  require_interval_steps("eval_steps", eval_steps == 0 ? logging_steps : eval_steps, eval_strategy);
  require_interval_steps("logging_steps", logging_steps, logging_strategy);
  require_interval_steps("save_steps", save_steps, save_strategy);
  require(save_total_limit >= 0, "save_total_limit", save_total_limit, ">= 0 (0: keep every checkpoint)");
  require(dataloader_num_workers >= 0, "dataloader_num_workers", dataloader_num_workers, ">= 0");
  for (const std::string& target : report_to) require_one_of("report_to", target, {"csv", "tensorboard"});
  if (const auto* path = std::get_if<std::string>(&resume_from_checkpoint))
    require(!path->empty(), "resume_from_checkpoint", "\"\"", "a checkpoint folder, true (the newest) or false");
}

int64_t TrainingArguments::get_warmup_steps(int64_t total_steps) const {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

}  // namespace sg::dist
