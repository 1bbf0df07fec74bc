// train_gpt: PyTorch's minGPT-ddp recipe (a character-level GPT trained data-parallel) as one
// program. It reads the recipe's YAML file (data_config, gpt_config, trainer_config,
// optimizer_config; default apps/gpt_train_cfg.yaml), takes section.key=value overrides, and
// trains on one process or, under `sgrun --nproc-per-node N`, on N (DDP over Gloo, or NCCL with
// --device cuda). Rank 0 writes a snapshot every save_every epochs; every rank resumes from it at
// start, so `sgrun --max-restarts 1` survives a killed worker. `train_gpt --generate --prompt ...
// --snapshot FILE` samples from a snapshot. docs/gpt.md has the keys and the story.
//
// Test hook: with SG_TEST_KILL_AT_STEP=N in the environment, rank SG_TEST_KILL_RANK (default 1)
// kills itself with SIGKILL right after step N of the first attempt (SG_RESTART_COUNT 0), as the
// OOM killer would; tests/test_train_gpt.cpp uses it to stop a worker at a known point.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/ddp_flags.h"
#include "apps/gpt_config.h"
#include "apps/test_hooks.h"
#include "core/atomic_file.h"
#include "core/number_text.h"
#include "data/char_dataset.h"
#include "data/dataloader.h"
#include "dist/step_report.h"
#include "log/metrics_log.h"
#include "log/progress_bar.h"
#include "log/step_profiler.h"
#include "models/gpt.h"
#include "nn/functional.h"
#include "optim/checkpoint.h"
#include "syncgrad.h"
#include "train/accelerator.h"
#include "train/model_flops_utilization.h"
#include "train/nonfinite_loss.h"
#include "train/step_snapshots.h"

namespace {

using sg::apps::gpt::DataConfig;
using sg::apps::gpt::load_config;
using sg::apps::gpt::RunConfig;
using sg::apps::gpt::TrainerConfig;

// ---- the program ----

struct AppOptions {
  std::string config_path = SG_GPT_TRAIN_CFG;
  std::vector<std::string> overrides;
  std::string gradient_accumulation_steps;  // the override trainer_config.gradient_accumulation_steps, when given
  int threads = 1;
  std::string device = "auto";
  std::string comm_hook = "no";
  bool zero = false;                  // ZeRO-1: each process keeps the optimizer state of its shard of the parameters
  bool zero_shard_gradients = false;  // ZeRO-2's gradients: each process receives its shard's average only
  bool generate = false;
  std::string prompt;
  std::string snapshot;
  int64_t max_new_tokens = 500;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: no top-k
  bool greedy = false;
  bool no_cache = false;
  uint64_t seed = 0;
  std::string profile;          // directory for the profile of steps 2-6
  int max_nonfinite_steps = 5;  // 0: train on whatever the loss is
};

constexpr int kMaxThreads = 1024;

std::shared_ptr<sg::data::CharDataset> make_dataset(const DataConfig& config) {
  if (config.path == "fortunes")
    return std::make_shared<sg::data::CharDataset>(
        sg::data::fortunes_corpus(), config.block_size, config.truncate,
        std::string("the fortunes corpus (") + sg::data::kFortunesDirectory + ")");
  SG_CHECK(config.path.find("://") == std::string::npos, "data_config.path ", config.path,
           " is a URL; train_gpt reads local files only (the recipe reads URLs through fsspec): download it, "
           "then give data_config.path=FILE");
  return sg::data::CharDataset::from_file(config.path, config.block_size, config.truncate);
}

// For the start line: a run whose epochs after `epochs_run` include no multiple of save_every
// writes no snapshot, which a user would otherwise find out only at the end.
std::string no_snapshot_note(const TrainerConfig& trainer, int64_t epochs_run) {
  const int64_t first_saved = (epochs_run / trainer.save_every + 1) * trainer.save_every;
  if (first_saved <= trainer.max_epochs) return "";
  return sg::detail::concat(", no snapshot will be written (save_every ", trainer.save_every, ", last epoch ",
                            trainer.max_epochs, ")");
}

// What a snapshot must carry besides the weights to rebuild the model (models::gpt_metadata) and
// decode its output (the vocabulary).
sg::optim::Metadata model_metadata(const sg::models::ResolvedGPTConfig& gpt,
                                   const sg::data::CharVocabulary& vocabulary) {
  sg::optim::Metadata metadata = sg::models::gpt_metadata(gpt);
  metadata["vocabulary"] = vocabulary.to_utf8();
  return metadata;
}

// The recipe's eval pass: every rank's loss per example of its share of the test split, gathered
// to every rank without the sampler's padding, averaged.
double evaluate(sg::dist::Accelerator& accelerator, sg::nn::Module& model, sg::data::DataLoader& loader) {
  sg::NoGradGuard no_grad;
  model.eval();
  sg::TensorList losses;
  {
    const sg::amp::AutocastGuard autocast = accelerator.autocast();
    for (const sg::data::Batch& batch : loader) {
      const sg::Tensor logits = model(batch.input);
      const int64_t B = logits.size(0), T = logits.size(1);
      losses.push_back(accelerator.gather_for_metrics(
          sg::nn::functional::cross_entropy(logits.reshape({B * T, -1}), batch.target.reshape({-1}),
                                            {.ignore_index = -1, .reduction = sg::Reduction::none})
              .reshape({B, T})
              .mean({1})));
    }
  }
  model.train();
  return losses.empty() ? std::numeric_limits<double>::quiet_NaN() : sg::cat(losses).mean().item();
}

// The Accelerator's mixed_precision for trainer_config.use_amp on `device`. The recipe's use_amp
// is torch.cuda.amp.autocast, f16 on a GPU, which leaves CPU tensors alone. A CPU here computes
// f16 and bf16 products in f32 and rounds them, slower than f32, so use_amp on a CPU trains in f32
// unless amp_dtype names a type (to see a GPU's rounding), and the start line says which it is.
std::string mixed_precision_for(const TrainerConfig& trainer, const sg::Device& device) {
  if (!trainer.use_amp) return "no";
  if (!trainer.amp_dtype.empty()) return trainer.amp_dtype;
  return device.is_cpu() ? "no" : "f16";
}

int train(const RunConfig& config, const AppOptions& app) {
  const TrainerConfig& trainer = config.trainer;
  sg::check_writable_destination("trainer_config.snapshot_path", trainer.snapshot_path);
  sg::check_writable_destination("trainer_config.log_path", trainer.log_path);
  sg::dist::AcceleratorOptions options;
  options.mixed_precision = mixed_precision_for(trainer, sg::dist::accelerator_device(app.device));
  options.amp_diagnostics = trainer.amp_debug;
  options.device = app.device;
  options.gradient_accumulation_steps = trainer.gradient_accumulation_steps;
  options.comm_hook = app.comm_hook;
  options.zero_shard_gradients = app.zero_shard_gradients;
  if (trainer.save_every_steps > 0)
    options.project_config = sg::dist::step_snapshots(trainer.snapshot_path, static_cast<int>(trainer.keep));
  sg::dist::Accelerator accelerator(options);
  if (trainer.use_amp && options.mixed_precision == "no")
    accelerator.print(
        "use_amp: the CPU has no faster f16 or bf16 products, so this run trains in f32 (name "
        "trainer_config.amp_dtype=f16 or bf16 to see a GPU's rounding, emulated and slower)");
  if (!trainer.tensorboard_dir.empty())
    accelerator.init_trackers(trainer.tensorboard_dir);  // before the data: fail fast
  sg::set_num_threads(app.threads);
  sg::manual_seed(static_cast<uint64_t>(trainer.seed));

  // The recipe's get_train_objs: the data set, its random split, a model sized to its vocabulary.
  const std::shared_ptr<sg::data::CharDataset> dataset = make_dataset(config.data);
  // Texts with other characters but as many of them build equal models: only this tells them apart.
  accelerator.check_agreement("vocabulary", dataset->vocabulary().to_utf8());
  const auto train_length = static_cast<int64_t>(static_cast<double>(dataset->size()) * config.data.train_split);
  sg::Generator split_generator(static_cast<uint64_t>(trainer.seed));
  const auto parts = sg::data::random_split(dataset, {train_length, dataset->size() - train_length}, split_generator);
  SG_CHECK(train_length >= 1, "data_config.train_split ", config.data.train_split, " of ", dataset->size(),
           " examples leaves none to train on");
  accelerator.print("Data has ", dataset->num_characters(), " characters, ", dataset->vocabulary().size(), " unique.");
  sg::models::GPTConfig gpt_config = config.gpt;
  gpt_config.vocab_size = dataset->vocabulary().size();
  gpt_config.block_size = dataset->block_size();
  auto gpt = std::make_shared<sg::models::GPT>(gpt_config);
  gpt->activation_checkpointing = trainer.activation_checkpointing;
  accelerator.print("number of parameters: ", sg::fixed_text(static_cast<double>(gpt->num_block_parameters()) / 1e6, 2),
                    "M");
  std::unique_ptr<sg::optim::Optimizer> optimizer = sg::models::create_optimizer(*gpt, config.optimizer);
  std::shared_ptr<sg::nn::Module> model = accelerator.prepare(gpt);
  if (app.zero && accelerator.num_processes() > 1)  // after prepare: the shards live on the group's device
    optimizer = std::make_unique<sg::dist::ZeroRedundancyOptimizer>(std::move(optimizer));
  accelerator.prepare(*optimizer);

  const bool pin_memory = accelerator.device().is_cuda();
  const auto workers = static_cast<int>(trainer.data_loader_workers);
  sg::data::DataLoader train_loader = accelerator.prepare(parts[0], {.batch_size = trainer.batch_size,
                                                                     .shuffle = true,
                                                                     .num_workers = workers,
                                                                     .seed = static_cast<uint64_t>(trainer.seed),
                                                                     .pin_memory = pin_memory});
  std::optional<sg::data::DataLoader> test_loader;  // none when train_split is 1, as the recipe
  if (parts[1]->size() > 0)
    test_loader.emplace(accelerator.prepare(
        parts[1], {.batch_size = trainer.batch_size, .num_workers = workers, .pin_memory = pin_memory}));

  // The sample's prompt, checked now rather than after hours of training.
  std::vector<int64_t> sample_prompt = {dataset->get(0).input.data_ptr<int64_t>()[0]};
  if (!trainer.sample_prompt.empty()) {
    try {
      sample_prompt = dataset->vocabulary().encode(sg::data::decode_utf8(trainer.sample_prompt, "sample_prompt"));
    } catch (const sg::Error& error) {
      SG_FAIL("trainer_config.sample_prompt: ", error.what());
    }
  }
  const sg::optim::Metadata model_info = model_metadata(gpt->config, dataset->vocabulary());
  int64_t epochs_run = 0, step = 0;
  if (const std::string resume_from = sg::dist::snapshot_to_resume(accelerator, trainer.snapshot_path);
      !resume_from.empty()) {
    const sg::optim::Metadata metadata = accelerator.load_state(resume_from, *model);
    for (const auto& [name, value] : model_info) {
      const auto it = metadata.find(name);
      SG_CHECK(it != metadata.end() && it->second == value, "snapshot ", resume_from, ": its ", name,
               " differs from this run's (another model or another text?); move it away to start afresh");
    }
    epochs_run = sg::optim::metadata_integer(metadata, "epoch", resume_from, 0, trainer.max_epochs);
    step = sg::optim::metadata_integer(metadata, "step", resume_from, 0, std::numeric_limits<int64_t>::max());
    accelerator.print("Resuming training from snapshot ", resume_from, " at Epoch ", epochs_run, " (step ", step, ")");
  } else {
    accelerator.print("Snapshot not found. Training model from scratch");
  }
  const sg::dist::ModelFlopsUtilization mfu(accelerator, sg::models::gpt_training_flops_per_token(gpt->config));
  accelerator.print(
      accelerator.num_processes(), " process(es) x ", app.threads, " thread(s) on ", accelerator.device(), ", ",
      trainer.batch_size, " sequences of ", gpt_config.block_size, " tokens per process and ",
      sg::dist::batch_note(accelerator.gradient_accumulation_steps()), ", ", parts[0]->size(), " training / ",
      parts[1]->size(), " test sequences",
      options.mixed_precision != "no" ? ", autocast " + options.mixed_precision : "",
      gpt->activation_checkpointing ? ", activation checkpointing (each Block recomputed in backward)" : "",
      no_snapshot_note(trainer, epochs_run), mfu.peak_note(),
      sg::dist::zero_sharding_note(*optimizer, 2));  // AdamW's two moments

  const sg::amp::GradScaler& scaler = accelerator.scaler();
  sg::data::MetricsLog log(accelerator.is_main_process() ? trainer.log_path : "",
                           {"step", "epoch", "loss", "eval_loss", "grad_norm", "scale"});
  std::FILE* progress_out = accelerator.is_main_process() ? stderr : nullptr;
  const sg::TensorList params = model->parameters();
  const int64_t tokens_per_step = trainer.batch_size * gpt_config.block_size * accelerator.num_processes() *
                                  accelerator.gradient_accumulation_steps();
  sg::dist::NonfiniteLossGuard nonfinite_guard(app.max_nonfinite_steps, "--max-nonfinite-steps", &accelerator);
  sg::profiler::StepProfiler profiler(app.profile, accelerator.process_index(), accelerator.num_processes());
  sg::dist::report_steps_across_ranks(profiler, app.profile);                   // DIR/step_report.txt under sgrun
  for (int64_t epoch = epochs_run + 1; epoch <= trainer.max_epochs; ++epoch) {  // 1-based, as the recipe
    train_loader.set_epoch(epoch);
    sg::data::ProgressBar bar(accelerator.optimizer_steps_in_next_pass(train_loader),
                              "epoch " + std::to_string(epoch) + "/" + std::to_string(trainer.max_epochs), "tok",
                              progress_out);
    double loss_value = 0;
    for (const sg::data::Batch& batch : train_loader) {
      const auto accumulation = accelerator.accumulate(*model);  // one step per gradient_accumulation_steps
      sg::Tensor loss;
      {
        const sg::amp::AutocastGuard autocast = accelerator.autocast();
        loss = sg::models::gpt_loss((*model)(batch.input), batch.target);
      }
      accelerator.backward(loss);
      loss_value = loss.item();  // this rank's micro-batch's mean (backward weighs a copy)
      const int64_t tokens = batch.input.size(0) * gpt_config.block_size * accelerator.num_processes();
      if (!accelerator.sync_gradients()) {  // the gradients add up until the accumulation's last micro-batch
        nonfinite_guard.add_micro_batch_loss(loss_value);
        bar.update(0, tokens, {{"loss", loss_value}});
        continue;
      }
      const double grad_norm = accelerator.clip_grad_norm_(params, trainer.grad_norm_clip);
      accelerator.step(*optimizer);
      accelerator.zero_grad(*optimizer);
      ++step;
      profiler.step();
      bar.update(1, tokens, {{"loss", loss_value}});
      log.write({{"step", std::to_string(step)},
                 {"epoch", std::to_string(epoch)},
                 {"loss", std::to_string(loss_value)},
                 {"grad_norm", std::to_string(grad_norm)},
                 {"scale", scaler.is_enabled() ? std::to_string(scaler.get_scale()) : ""}});
      std::map<std::string, double> scalars = {{"loss/train", loss_value}, {"grad_norm", grad_norm}};
      if (scaler.is_enabled()) scalars["amp/loss_scale"] = scaler.get_scale();
      if (const sg::amp::ScalerDiagnostics* diagnostics = scaler.diagnostics())
        scalars.merge(diagnostics->underflow_scalars());
      accelerator.log(scalars, step);
      nonfinite_guard.observe(loss_value, step);  // Note [Stopping on a non-finite loss]
      if (trainer.save_every_steps > 0 && step % trainer.save_every_steps == 0) {  // resumes inside this epoch
        sg::optim::Metadata metadata = model_info;
        metadata["epoch"] = std::to_string(epoch - 1);  // the epochs run, as the per-epoch snapshot's
        metadata["step"] = std::to_string(step);
        nonfinite_guard.check_before_saving(*gpt, trainer.snapshot_path + ".steps", step);
        accelerator.save_state(*model, metadata);
      }
      maybe_kill_for_test(step, accelerator.process_index());
    }
    bar.finish();
    accelerator.print("Epoch ", epoch, " | train loss ", sg::fixed_text(loss_value, 5), " (last batch of rank 0) | ",
                      sg::fixed_text(bar.items_per_second(), 0), " tokens/s (", tokens_per_step, " per step)",
                      mfu.progress_note(bar.items_per_second()));
    if (epoch % trainer.save_every == 0) {
      sg::optim::Metadata metadata = model_info;
      metadata["epoch"] = std::to_string(epoch);
      metadata["step"] = std::to_string(step);
      nonfinite_guard.check_before_saving(*gpt, trainer.snapshot_path, step);
      accelerator.save_state(trainer.snapshot_path, *model, metadata);
      accelerator.print("Snapshot saved at epoch ", epoch);
    }
    if (test_loader) {
      const double eval_loss = evaluate(accelerator, *model, *test_loader);
      accelerator.print("Epoch ", epoch, " | eval loss ", sg::fixed_text(eval_loss, 5), " over ",
                        test_loader->dataset().size(), " test sequences (all ranks)");
      log.write(
          {{"step", std::to_string(step)}, {"epoch", std::to_string(epoch)}, {"eval_loss", std::to_string(eval_loss)}});
      accelerator.log({{"loss/eval", eval_loss}}, step);
    }
  }
  accelerator.end_training();

  if (accelerator.is_main_process() && trainer.sample_tokens > 0) {
    gpt->eval();
    const sg::data::CharVocabulary& vocabulary = dataset->vocabulary();
    sg::Generator sampler(static_cast<uint64_t>(trainer.seed));
    const sg::Tensor out =
        gpt->generate(sg::tensor(sample_prompt, {1, static_cast<int64_t>(sample_prompt.size())}),
                      {.max_new_tokens = trainer.sample_tokens, .do_sample = true, .top_k = 10, .generator = &sampler});
    const sg::Tensor ids = out.to(sg::Device::cpu()).contiguous();
    const int64_t* data = ids.data_ptr<int64_t>();
    accelerator.print("--- sample (", trainer.sample_tokens, " tokens, top_k 10) ---\n",
                      sg::data::encode_utf8(vocabulary.decode(std::vector<int64_t>(data, data + ids.numel()))));
  }
  return 0;
}

int generate(const AppOptions& app) {
  SG_CHECK(!app.snapshot.empty(), "--generate needs --snapshot FILE (a snapshot train_gpt wrote)");
  sg::set_num_threads(app.threads);
  const sg::SafetensorsFile snapshot = sg::load_safetensors(app.snapshot);
  const auto vocabulary_entry = snapshot.metadata.find("vocabulary");
  SG_CHECK(vocabulary_entry != snapshot.metadata.end(), "checkpoint ", app.snapshot,
           ": no metadata entry 'vocabulary' (not a snapshot of train_gpt?)");
  const sg::data::CharVocabulary vocabulary = sg::data::CharVocabulary::from_utf8(vocabulary_entry->second);
  const sg::models::GPTConfig config =
      sg::models::gpt_config_from_snapshot(snapshot.metadata, snapshot.tensors, app.snapshot);
  SG_CHECK(static_cast<int64_t>(vocabulary.size()) == config.vocab_size, "checkpoint ", app.snapshot,
           ": its vocabulary has ", vocabulary.size(), " characters but its vocab_size is ", config.vocab_size);
  sg::models::GPT model(config);
  sg::optim::load_checkpoint(app.snapshot, model);
  model.eval();
  SG_CHECK(!app.prompt.empty(), "--prompt is empty; give at least one character");
  const std::vector<int64_t> prompt = vocabulary.encode(sg::data::decode_utf8(app.prompt, "--prompt"));
  sg::Generator sampler(app.seed);
  const auto start = std::chrono::steady_clock::now();
  const sg::Tensor out = model.generate(sg::tensor(prompt, {1, static_cast<int64_t>(prompt.size())}),
                                        {.max_new_tokens = app.max_new_tokens,
                                         .temperature = app.temperature,
                                         .do_sample = !app.greedy,
                                         .top_k = app.top_k > 0 ? std::optional<int64_t>(app.top_k) : std::nullopt,
                                         .use_cache = !app.no_cache,
                                         .generator = &sampler});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t* data = out.data_ptr<int64_t>();
  std::printf("%s\n", sg::data::encode_utf8(vocabulary.decode(std::vector<int64_t>(data, data + out.numel()))).c_str());
  std::fprintf(stderr, "%lld new tokens in %.3f s: %.1f tokens/s (KV cache %s, %d thread(s))\n",
               static_cast<long long>(app.max_new_tokens), seconds, static_cast<double>(app.max_new_tokens) / seconds,
               app.no_cache ? "off" : "on", app.threads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  AppOptions app;
  CLI::App cli{"Train the minGPT-ddp recipe's character-level GPT (syncgrad), or sample from a snapshot"};
  cli.add_option("overrides", app.overrides,
                 "section.key=value changes to the config, e.g. trainer_config.max_epochs=2");
  cli.add_option("--config", app.config_path, "The recipe's YAML file")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  cli.add_option("--threads", app.threads, "Intra-op threads per process")
      ->check(CLI::Range(1, kMaxThreads))
      ->capture_default_str();
  cli.add_option("--device", app.device, "auto (the GPU of LOCAL_RANK when CUDA is available), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  add_comm_hook_option(cli, app.comm_hook);
  add_zero_shard_gradients_flag(cli, app.zero_shard_gradients, add_zero_flag(cli, app.zero));
  cli.add_flag("--generate", app.generate, "Sample from --snapshot instead of training");
  cli.add_option("--prompt", app.prompt, "--generate: the text to continue");
  cli.add_option("--snapshot", app.snapshot, "--generate: a snapshot train_gpt wrote")->check(CLI::ExistingFile);
  cli.add_option("--max-new-tokens", app.max_new_tokens, "--generate: characters to add")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cli.add_option("--temperature", app.temperature, "--generate: divides the logits")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cli.add_option("--top-k", app.top_k, "--generate: sample among the k most likely (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cli.add_flag("--greedy", app.greedy, "--generate: take the most likely character instead of sampling");
  cli.add_flag("--no-cache", app.no_cache, "--generate: recompute the whole context for every token (no KV cache)");
  cli.add_option("--seed", app.seed, "--generate: seed of the sampling")->capture_default_str();
  cli.add_option("--profile", app.profile,
                 "Profile training steps 2-6 into DIR (trace.json for ui.perfetto.dev, key_averages.txt; per rank "
                 "under sgrun)");
  cli.add_option("--max-nonfinite-steps", app.max_nonfinite_steps,
                 "Stop with an error after N consecutive steps whose loss is inf or NaN (0: never). Steps the f16 "
                 "loss scaler skips for overflowing gradients do not count; the snapshot is never overwritten with "
                 "inf or NaN weights")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cli.add_option("--gradient-accumulation-steps", app.gradient_accumulation_steps,
                 "Short for the override trainer_config.gradient_accumulation_steps=K: K micro-batches of batch_size "
                 "add up their gradients before each optimizer step");
  CLI11_PARSE(cli, argc, argv);
  if (!app.gradient_accumulation_steps.empty())  // last: it wins over the positional overrides
    app.overrides.push_back("trainer_config.gradient_accumulation_steps=" + app.gradient_accumulation_steps);
  try {
    if (app.generate) return generate(app);
    return train(load_config(app.config_path, app.overrides), app);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "train_gpt: %s\n", error.what());
    return 1;
  }
}
