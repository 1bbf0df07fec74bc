#include "train/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <utility>

#include "autograd/grad_mode.h"
#include "autograd/ops_index.h"
#include "core/factory.h"
#include "log/progress_bar.h"
#include "nn/functional.h"

namespace sg::dist {

// Note [The logged loss]
// HF logs, every logging_steps optimizer steps, the mean loss per step over those steps and over
// the processes, and train() returns the mean over all steps. Here a step's loss is the mean of
// its micro-batches' losses (each the mean over its batch), added up on the device in
// window_loss_ without a host sync for the logs (each step's loss is read once, for Note [Stopping
// on a non-finite loss] in train/nonfinite_loss.h, as clipping and the scaler read their figures);
// a log all-reduces the window once and adds it to total_loss_, which is the same on every process
// from then on. A checkpoint stores the window averaged over the processes — every process
// resumes with that, so the next log's average is the uninterrupted run's — and total_loss_, so a
// resumed run logs and returns what an uninterrupted one does (HF starts both afresh on resume).

namespace fs = std::filesystem;

namespace {

// HF's get_decay_parameter_names: every trainable parameter decays except those of LayerNorm
// layers and those whose lower-cased name contains "bias", "layernorm" or "rmsnorm". RMSNorm
// layers are recognised by type as well, since names here need not say "rmsnorm".
std::unique_ptr<optim::AdamW> make_optimizer(nn::Module& model, const TrainingArguments& args) {
  std::set<const TensorImpl*> in_norm_layers;
  for (const auto& [name, module] : model.named_modules())
    if (module->type_name() == "LayerNorm" || module->type_name() == "RMSNorm")
      for (const Tensor& param : module->parameters()) in_norm_layers.insert(param.impl());
  TensorList decay, no_decay;
  for (const auto& [name, param] : model.named_parameters()) {
    if (!param.requires_grad()) continue;
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool exempt = in_norm_layers.count(param.impl()) == 1 || lower.find("bias") != std::string::npos ||
                        lower.find("layernorm") != std::string::npos || lower.find("rmsnorm") != std::string::npos;
    (exempt ? no_decay : decay).push_back(param);
  }
  std::unique_ptr<optim::AdamW> optimizer;
  for (const auto& [params, weight_decay] : {std::pair{decay, args.weight_decay}, std::pair{no_decay, 0.0}}) {
    if (params.empty()) continue;
    const optim::AdamWOptions options{.lr = args.learning_rate,
                                      .beta1 = args.adam_beta1,
                                      .beta2 = args.adam_beta2,
                                      .eps = args.adam_epsilon,
                                      .weight_decay = weight_decay};
    if (optimizer) optimizer->add_param_group(params, options);
    else optimizer = std::make_unique<optim::AdamW>(params, options);
  }
  SG_CHECK(optimizer != nullptr,
           "Trainer: the model has no parameter that requires grad, so there is nothing to train");
  return optimizer;
}

// Checked before the Accelerator joins a process group: a bad option fails at once, not at a timeout.
AcceleratorOptions accelerator_options(const TrainingArguments& args) {
  args.check();
  AcceleratorOptions options;
  options.mixed_precision = args.mixed_precision;
  options.gradient_accumulation_steps = args.gradient_accumulation_steps;
  options.device = args.use_cpu ? "cpu" : "auto";
  options.ddp.check_replicas_every = args.ddp_check_replicas_every;
  return options;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A count as HF prints it: 60000 -> "60,000".
std::string with_commas(int64_t count) {
  const std::string digits = std::to_string(count);
  std::string text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

std::string format_number(double value, int significant_digits = 10) {
  std::ostringstream text;
  text.precision(significant_digits);
  text << value;
  return text.str();
}

// A log as HF prints it, to 4 digits: {'epoch': 0.5, 'learning_rate': 4.5e-05, 'loss': 0.3152}.
std::string python_dict(const Metrics& logs) {
  std::string text = "{";
  for (const auto& [name, value] : logs)
    text += (text.size() > 1 ? ", '" : "'") + name + "': " + format_number(value, 4);
  return text + "}";
}

// HF's TensorBoardCallback names: eval_loss -> eval/loss, anything else -> train/<name>.
std::string tensorboard_tag(const std::string& name) {
  return name.starts_with("eval_") ? "eval/" + name.substr(5) : "train/" + name;
}

// The progress bar's figure: the newest logged training loss.
std::vector<std::pair<std::string, double>> last_training_loss(const std::vector<Metrics>& history) {
  for (auto entry = history.rbegin(); entry != history.rend(); ++entry)
    if (const auto loss = entry->find("loss"); loss != entry->end()) return {{"loss", loss->second}};
  return {};
}

// The batches of a loader dist::Accelerator::prepare made.
const data::DistributedBatchSampler& distributed_batches(const data::DataLoader& loader) {
  return dynamic_cast<const data::DistributedBatchSampler&>(loader.batch_sampler());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Trainer::Trainer(std::shared_ptr<nn::Module> model, TrainingArguments args,
                 std::shared_ptr<const data::Dataset> train_dataset, std::shared_ptr<const data::Dataset> eval_dataset,
                 TrainerHooks hooks)
    : args_(std::move(args)),
      hooks_(std::move(hooks)),
      accelerator_(accelerator_options(args_)),
      nonfinite_guard_(args_.max_nonfinite_steps, "TrainingArguments.max_nonfinite_steps", &accelerator_) {
  SG_CHECK(model != nullptr, "Trainer: the model is null");
  SG_CHECK(train_dataset != nullptr && train_dataset->size() > 0, "Trainer: train_dataset is null or empty");
  SG_CHECK(eval_dataset == nullptr || eval_dataset->size() > 0, "Trainer: eval_dataset is empty");
  SG_CHECK(args_.eval_strategy == "no" || eval_dataset != nullptr, "TrainingArguments: eval_strategy is \"",
           args_.eval_strategy, "\", but the Trainer was given no eval_dataset");
  for (const auto& callback : hooks_.callbacks) SG_CHECK(callback != nullptr, "Trainer: a callback is null");
  set_seed(args_.seed);
  model_ = accelerator_.prepare(std::move(model));
  // The same loaders in the same order in every run: load_state restores their positions by order.
  const bool pin_memory = accelerator_.device().is_cuda();
  train_loader_.emplace(accelerator_.prepare(std::move(train_dataset), {.batch_size = args_.per_device_train_batch_size,
                                                                        .shuffle = true,
                                                                        .num_workers = args_.dataloader_num_workers,
                                                                        .seed = args_.seed,
                                                                        .pin_memory = pin_memory}));
  if (eval_dataset != nullptr)
    eval_loader_.emplace(accelerator_.prepare(std::move(eval_dataset), {.batch_size = args_.per_device_eval_batch_size,
                                                                        .num_workers = args_.dataloader_num_workers,
                                                                        .pin_memory = pin_memory}));
  optimizer_ = make_optimizer(accelerator_.unwrap_model(*model_), args_);
  accelerator_.prepare(*optimizer_);
  // The Accelerator also steps after an epoch's last micro-batch, so a short last window is an
  // optimizer step (HF rounds down here, yet steps there too).
  updates_per_epoch_ = ceil_div(train_loader_->size(), args_.gradient_accumulation_steps);
  state_.max_steps =
      args_.max_steps > 0
          ? args_.max_steps
          : static_cast<int64_t>(std::ceil(args_.num_train_epochs * static_cast<double>(updates_per_epoch_)));
  state_.num_train_epochs = ceil_div(state_.max_steps, updates_per_epoch_);
  state_.is_world_process_zero = accelerator_.is_main_process();
  state_.world_size = accelerator_.num_processes();
  scheduler_ = std::make_unique<optim::LambdaLR>(
      *optimizer_,
      [type = args_.lr_scheduler_type, warmup = args_.get_warmup_steps(state_.max_steps),
       total = state_.max_steps](int64_t step) { return optim::get_schedule_factor(type, step, warmup, total); });
  accelerator_.prepare(*scheduler_);
  step_loss_ = window_loss_ = scalar(0);
  if (accelerator_.is_main_process()) {
    std::error_code error;
    fs::create_directories(args_.output_dir, error);
    SG_CHECK(!error, "TrainingArguments: output_dir '", args_.output_dir, "' cannot be created: ", error.message());
  }
  const auto& targets = args_.report_to;
  if (std::find(targets.begin(), targets.end(), "tensorboard") != targets.end())
    accelerator_.init_trackers(args_.logging_dir.empty() ? (fs::path(args_.output_dir) / "runs").string()
                                                         : args_.logging_dir);
  open_csv();
}

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  SG_CHECK(callback != nullptr, "Trainer::add_callback: the callback is null");
  hooks_.callbacks.push_back(std::move(callback));
}

Tensor Trainer::scalar(double value) const { return scalar_tensor(value, {DType::f32, accelerator_.device()}); }

Tensor Trainer::compute_loss(const Tensor& outputs, const Tensor& labels) const {
  return hooks_.compute_loss_func ? hooks_.compute_loss_func(outputs, labels)
                                  : nn::functional::cross_entropy(outputs, labels);
}

TrainOutput Trainer::train() {
  print_summary();
  position_ = resume();
  model_->train();
  control_ = {};
  notify(&TrainerCallback::on_train_begin);
  data::ProgressBar bar(state_.max_steps, "train", "ex",
                        accelerator_.is_main_process() && !args_.disable_tqdm ? stderr : nullptr);
  bar.update(state_.global_step, 0);
  const auto start = std::chrono::steady_clock::now();
  const int64_t first_step = state_.global_step;
  const int64_t batches_per_epoch = train_loader_->size();
  // Only the first epoch of a resumed run starts past batch 0, and the loop skips those batches
  // itself (Note [Checkpoints and resuming] in train/checkpoint_folders.h).
  int64_t skip = position_.batch;
  for (int64_t epoch = position_.epoch;
       epoch < state_.num_train_epochs && state_.global_step < state_.max_steps && !control_.should_training_stop;
       ++epoch) {
    train_loader_->set_epoch(epoch);
    train_loader_->skip_first_batches(skip);
    int64_t batch_index = std::exchange(skip, 0);
    control_.should_epoch_stop = false;
    notify(&TrainerCallback::on_epoch_begin);
    for (const data::Batch& batch : *train_loader_) {
      training_step(batch);
      position_ = {epoch, ++batch_index};
      if (!accelerator_.sync_gradients()) continue;
      const int64_t rows = step_rows_ * accelerator_.num_processes();
      optimizer_step();
      state_.epoch =
          static_cast<double>(epoch) + static_cast<double>(batch_index) / static_cast<double>(batches_per_epoch);
      step_flow();
      notify(&TrainerCallback::on_step_end);
      maybe_log_save_evaluate();
      bar.update(1, rows, last_training_loss(state_.log_history));
      if (control_.should_epoch_stop || control_.should_training_stop) break;
    }
    // Stopped inside the epoch, the run resumes there; otherwise with the next one.
    if (batch_index == batches_per_epoch || !control_.should_training_stop) position_ = {epoch + 1, 0};
    epoch_flow();
    notify(&TrainerCallback::on_epoch_end);
    maybe_log_save_evaluate();
  }
  bar.finish();
  // The steps since the last log count in the mean too.
  total_loss_ += accelerator_.reduce(window_loss_, "mean").item();
  window_loss_ = scalar(0);
  last_logged_step_ = state_.global_step;
  const double runtime = seconds_since(start);
  const auto steps = static_cast<double>(state_.global_step - first_step);
  const auto total_batch = static_cast<double>(args_.per_device_train_batch_size * args_.gradient_accumulation_steps *
                                               accelerator_.num_processes());
  TrainOutput output{
      state_.global_step, total_loss_ / static_cast<double>(std::max<int64_t>(1, state_.global_step)), {}};
  output.metrics = {{"train_runtime", runtime},
                    {"train_samples_per_second", steps * total_batch / runtime},
                    {"train_steps_per_second", steps / runtime},
                    {"train_loss", output.training_loss}};
  log(output.metrics);
  output.metrics["epoch"] = state_.epoch;
  notify(&TrainerCallback::on_train_end);
  accelerator_.get_tracker().flush();
  return output;
}

void Trainer::training_step(const data::Batch& batch) {
  Tensor loss;
  {
    const auto accumulation = accelerator_.accumulate(*model_);
    {
      const amp::AutocastGuard autocast = accelerator_.autocast();
      loss = compute_loss((*model_)(batch.input), batch.target);
    }
    accelerator_.backward(loss);
  }
  step_loss_ = step_loss_ + loss.detach().to(DType::f32);
  ++step_micro_batches_;
  step_rows_ += batch.input.size(0);
}

void Trainer::optimizer_step() {
  grad_norm_.reset();
  if (args_.max_grad_norm > 0) grad_norm_ = accelerator_.clip_grad_norm_(model_->parameters(), args_.max_grad_norm);
  // As HF: when f16 gradients overflowed, the update was skipped and the schedule waits too.
  if (accelerator_.step(*optimizer_)) scheduler_->step();
  accelerator_.zero_grad(*optimizer_);
  const Tensor loss = step_loss_ / static_cast<double>(step_micro_batches_);
  window_loss_ = window_loss_ + loss;
  step_loss_ = scalar(0);
  step_micro_batches_ = step_rows_ = 0;
  ++state_.global_step;
  nonfinite_guard_.observe(loss.item(), state_.global_step);
}

// HF's DefaultFlowCallback: what the strategies ask for after an optimizer step ...
void Trainer::step_flow() {
  const int64_t step = state_.global_step;
  const int64_t eval_steps = args_.eval_steps > 0 ? args_.eval_steps : args_.logging_steps;
  if (args_.logging_strategy == "steps" && step % args_.logging_steps == 0) control_.should_log = true;
  if (args_.eval_strategy == "steps" && step % eval_steps == 0) control_.should_evaluate = true;
  if (args_.save_strategy == "steps" && step % args_.save_steps == 0) control_.should_save = true;
  if (step >= state_.max_steps) {
    control_.should_training_stop = true;
    // The last step is saved; with save_strategy "epoch" the epoch's end, which follows, does it.
    if (args_.save_strategy == "steps") control_.should_save = true;
  }
}

// ... and at the end of an epoch.
void Trainer::epoch_flow() {
  if (args_.logging_strategy == "epoch") control_.should_log = true;
  if (args_.eval_strategy == "epoch") control_.should_evaluate = true;
  if (args_.save_strategy == "epoch") control_.should_save = true;
}

void Trainer::maybe_log_save_evaluate() {
  if (control_.should_log && state_.global_step > last_logged_step_) {
    const double window = accelerator_.reduce(window_loss_, "mean").item();
    const auto steps = static_cast<double>(state_.global_step - last_logged_step_);
    total_loss_ += window;
    window_loss_ = scalar(0);
    last_logged_step_ = state_.global_step;
    Metrics logs{{"loss", window / steps}, {"learning_rate", scheduler_->get_last_lr()[0]}};
    if (grad_norm_) logs["grad_norm"] = *grad_norm_;
    log(logs);
  }
  if (control_.should_evaluate) evaluate();
  if (control_.should_save) save_checkpoint();
  control_.should_log = control_.should_evaluate = control_.should_save = false;
}

Metrics Trainer::evaluate() {
  SG_CHECK(eval_loader_.has_value(), "Trainer::evaluate: the Trainer was given no eval_dataset");
  const auto start = std::chrono::steady_clock::now();
  const bool was_training = model_->is_training();
  model_->eval();
  TensorList losses, predictions, labels;
  {
    NoGradGuard no_grad;
    const amp::AutocastGuard autocast = accelerator_.autocast();
    for (const data::Batch& batch : *eval_loader_) {
      const Tensor outputs = (*model_)(batch.input);
      // HF's eval loss: the batch's mean once per example, so that the mean over the gathered rows
      // weighs each batch by its examples. Here the mean over the examples only (HF's includes the
      // padded duplicates), so that eval_loss is exactly the mean over the eval set.
      const int64_t examples = accelerator_.example_rows().value();
      const Tensor batch_loss =
          examples == 0 ? scalar(0) : compute_loss(outputs.narrow(0, 0, examples), batch.target.narrow(0, 0, examples));
      const Tensor loss = batch_loss.to(DType::f32).reshape({1}).expand({batch.input.size(0)}).contiguous();
      losses.push_back(accelerator_.gather_for_metrics(loss).to(Device::cpu()));
      if (!hooks_.compute_metrics) continue;
      const TensorList gathered = accelerator_.gather_for_metrics({outputs, batch.target});
      predictions.push_back(gathered[0].to(Device::cpu()));
      labels.push_back(gathered[1].to(Device::cpu()));
    }
  }
  model_->train(was_training);
  Metrics metrics{{"eval_loss", cat(losses).mean().item()}};
  if (hooks_.compute_metrics)
    for (const auto& [name, value] : hooks_.compute_metrics({cat(predictions), cat(labels)}))
      metrics[name.starts_with("eval_") ? name : "eval_" + name] = value;
  const double runtime = seconds_since(start);
  metrics["eval_runtime"] = runtime;
  metrics["eval_samples_per_second"] = static_cast<double>(eval_loader_->dataset().size()) / runtime;
  metrics["eval_steps_per_second"] = static_cast<double>(eval_loader_->size()) / runtime;
  update_best_metric(metrics);
  log(metrics);
  notify(&TrainerCallback::on_evaluate, metrics);
  return metrics;
}

void Trainer::update_best_metric(const Metrics& metrics) {
  const std::string& name = args_.metric_for_best_model;
  if (name.empty()) return;
  const std::string key = name.starts_with("eval_") ? name : "eval_" + name;
  const auto found = metrics.find(key);
  SG_CHECK(found != metrics.end(), "TrainingArguments: metric_for_best_model is \"", name,
           "\", but evaluate() gave no '", key, "' (its keys: ", python_dict(metrics), ")");
  const bool greater = args_.greater_is_better.value_or(!name.ends_with("loss"));
  const double value = found->second;
  if (!state_.best_metric || (greater ? value > *state_.best_metric : value < *state_.best_metric)) {
    state_.best_metric = value;
    state_.best_global_step = state_.global_step;
  }
}

void Trainer::log(Metrics logs) {
  logs["epoch"] = state_.epoch;
  Metrics entry = logs;
  entry["step"] = static_cast<double>(state_.global_step);
  state_.log_history.push_back(entry);
  write_csv(entry);
  Metrics scalars;
  for (const auto& [name, value] : logs) scalars[tensorboard_tag(name)] = value;
  accelerator_.log(scalars, state_.global_step);
  accelerator_.print(python_dict(logs));
  notify(&TrainerCallback::on_log, logs);
}

// One row per value: the names differ between logs (training, evaluation, compute_metrics'), and a
// CSV's header is written first.
void Trainer::write_csv(const Metrics& entry) {
  if (!csv_) return;
  for (const auto& [name, value] : entry) {
    if (name == "step" || name == "epoch") continue;
    csv_->write({{"step", format_number(entry.at("step"))},
                 {"epoch", format_number(entry.at("epoch"))},
                 {"name", name},
                 {"value", format_number(value)}});
  }
}

// (Re)writes log.csv from the log history: after a resume, the history up to the checkpoint.
void Trainer::open_csv() {
  const auto& targets = args_.report_to;
  if (!accelerator_.is_main_process() || std::find(targets.begin(), targets.end(), "csv") == targets.end()) return;
  csv_.emplace((fs::path(args_.output_dir) / "log.csv").string(),
               std::vector<std::string>{"step", "epoch", "name", "value"});
  for (const Metrics& entry : state_.log_history) write_csv(entry);
}

void Trainer::save_checkpoint() {
  const std::string folder = checkpoint_folder(args_.output_dir, state_.global_step);
  nonfinite_guard_.check_before_saving(accelerator_.unwrap_model(*model_), folder, state_.global_step);
  if (state_.best_global_step == state_.global_step) state_.best_model_checkpoint = folder;
  const LoopState loop{position_, total_loss_, accelerator_.reduce(window_loss_, "mean").item(), last_logged_step_};
  write_checkpoint_folder(accelerator_, *model_, args_.output_dir, args_.save_total_limit, state_, loop,
                          distributed_batches(*train_loader_));
  notify(&TrainerCallback::on_save);
}

LoopPosition Trainer::resume() {
  const std::optional<std::string> folder = checkpoint_to_resume(args_);
  if (!folder) return {};
  TrainerCheckpoint checkpoint =
      read_checkpoint_folder(accelerator_, *model_, *folder, distributed_batches(*train_loader_));
  const int saved_world_size = checkpoint.state.world_size;
  // The run's length comes from the arguments of this run, as in HF, its processes from this run.
  checkpoint.state.max_steps = state_.max_steps;
  checkpoint.state.num_train_epochs = state_.num_train_epochs;
  checkpoint.state.world_size = state_.world_size;
  checkpoint.state.is_world_process_zero = state_.is_world_process_zero;
  state_ = std::move(checkpoint.state);
  total_loss_ = checkpoint.loop.total_loss;
  window_loss_ = scalar(checkpoint.loop.window_loss);
  last_logged_step_ = checkpoint.loop.last_logged_step;
  const LoopPosition position = checkpoint.loop.next;
  open_csv();
  accelerator_.print("  Continuing training from checkpoint ", *folder);
  accelerator_.print("  Continuing training from epoch ", position.epoch);
  accelerator_.print("  Continuing training from global step ", state_.global_step);
  if (saved_world_size != 0 && saved_world_size != state_.world_size)
    accelerator_.print("  Saved by ", saved_world_size, " processes, continuing on ", state_.world_size,
                       " at the same example of the epoch");
  accelerator_.print("  Will skip the first ", position.epoch, " epochs then the first ", position.batch,
                     " batches in the first epoch.");
  return position;
}

void Trainer::print_summary() const {
  int64_t trainable = 0;
  for (const Tensor& param : model_->parameters())
    if (param.requires_grad()) trainable += param.numel();
  const int64_t total_batch =
      args_.per_device_train_batch_size * args_.gradient_accumulation_steps * accelerator_.num_processes();
  accelerator_.print("***** Running training *****");
  accelerator_.print("  Num examples = ", with_commas(train_loader_->dataset().size()));
  accelerator_.print("  Num Epochs = ", with_commas(state_.num_train_epochs));
  accelerator_.print("  Instantaneous batch size per device = ", with_commas(args_.per_device_train_batch_size));
  accelerator_.print("  Total train batch size (w. parallel, distributed & accumulation) = ", with_commas(total_batch));
  accelerator_.print("  Gradient Accumulation steps = ", args_.gradient_accumulation_steps);
  accelerator_.print("  Total optimization steps = ", with_commas(state_.max_steps));
  accelerator_.print("  Number of trainable parameters = ", with_commas(trainable));
}

}  // namespace sg::dist
