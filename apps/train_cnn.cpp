// train_cnn: trains the Fashion-MNIST CNN (or BasicNet) and reports the test accuracy after
// every epoch. The same program runs on one process or, under `sgrun --nproc-per-node N`, data-
// parallel on N, on the CPU or one GPU per process (--device); dist::Accelerator does the
// difference. `train_cnn --help` lists the flags.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "apps/ddp_flags.h"
#include "apps/step_snapshot_flags.h"
#include "core/atomic_file.h"
#include "core/number_text.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "dist/step_report.h"
#include "log/metrics_log.h"
#include "log/progress_bar.h"
#include "log/step_profiler.h"
#include "models/cnn.h"
#include "nn/flop_count.h"
#include "nn/functional.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "syncgrad.h"
#include "train/accelerator.h"
#include "train/model_flops_utilization.h"
#include "train/nonfinite_loss.h"

namespace {

struct Config {
  std::string data_dir = sg::data::FashionMNIST::kDefaultRoot;
  std::string model = "cnn";
  int epochs = 4;
  int64_t batch_size = 64;
  int gradient_accumulation_steps = 1;
  double lr = 0.005;
  std::string optimizer = "adam";
  std::string scheduler = "none";
  int threads = 1;
  uint64_t seed = 0;
  int workers = 0;
  std::string save;
  std::string resume;
  std::string snapshot;
  StepSnapshotFlags step_snapshots;  // --save-every-steps, --keep
  std::string log;
  std::string tensorboard;
  int64_t train_subset = 0;  // 0: the whole training set
  int64_t test_subset = 0;   // 0: the whole test set
  bool sync_bn = false;
  std::string ddp_trace;
  std::string profile;  // directory for the profile of steps 2-6
  double bucket_mb = 25;
  int check_replicas_every = 0;
  std::string comm_hook = "no";
  bool zero_shard_gradients = false;
  bool zero = false;            // ZeRO-1: each process keeps the optimizer state of its shard of the parameters
  std::string amp = "none";     // none, f16 or bf16
  bool amp_debug = false;       // f16: the loss scaler's diagnostics (amp/scaler_diagnostics.h)
  std::string device = "auto";  // auto, cpu or cuda
  int max_nonfinite_steps = 5;  // 0: train on whatever the loss is
};

// The most --threads accepts: far above any machine's cores, low enough to catch a typo.
constexpr int kMaxThreads = 1024;

std::unique_ptr<sg::optim::Optimizer> make_optimizer(const Config& config, const sg::TensorList& params) {
  if (config.optimizer == "adam")
    return std::make_unique<sg::optim::Adam>(params, sg::optim::AdamOptions{.lr = config.lr});
  if (config.optimizer == "adamw")
    return std::make_unique<sg::optim::AdamW>(params, sg::optim::AdamWOptions{.lr = config.lr});
  return std::make_unique<sg::optim::SGD>(params, sg::optim::SGDOptions{.lr = config.lr, .momentum = 0.9});
}

// The loss of a batch: BasicNet ends in log_softmax (so NLL), the CNN gives logits.
sg::Tensor loss_of(const Config& config, const sg::Tensor& output, const sg::Tensor& target) {
  return config.model == "basicnet" ? sg::nn::functional::nll_loss(output, target)
                                    : sg::nn::functional::cross_entropy(output, target);
}

// The first `count` examples of `dataset` (all of them for 0), for quick runs.
std::shared_ptr<const sg::data::Dataset> first_examples(std::shared_ptr<const sg::data::Dataset> dataset,
                                                        int64_t count) {
  if (count == 0) return dataset;
  std::vector<int64_t> indices(std::min(count, dataset->size()));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  return std::make_shared<sg::data::Subset>(std::move(dataset), indices);
}

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

// Every rank evaluates its share of the test set; each batch's per-image results are gathered
// without the images the sampler repeated to pad the shares, so the figures are over exactly the
// test set.
Evaluation evaluate(const Config& config, sg::dist::Accelerator& accelerator, sg::nn::Module& model,
                    sg::data::DataLoader& loader) {
  sg::NoGradGuard no_grad;
  model.eval();
  sg::TensorList losses, correct;
  for (const sg::data::Batch& batch : loader) {
    const sg::Tensor output = model(batch.input);
    const sg::Tensor loss =
        config.model == "basicnet"
            ? sg::nn::functional::nll_loss(output, batch.target, {.reduction = sg::Reduction::none})
            : sg::nn::functional::cross_entropy(output, batch.target, {.reduction = sg::Reduction::none});
    const sg::TensorList gathered =
        accelerator.gather_for_metrics({loss, sg::eq(sg::argmax(output, 1), batch.target).to(sg::DType::f32)});
    losses.push_back(gathered[0]);
    correct.push_back(gathered[1]);
  }
  model.train();
  return {sg::cat(losses).mean().item(), 100.0 * sg::cat(correct).mean().item()};
}

int run(const Config& config) {
  sg::check_writable_destination("--save", config.save);
  sg::check_writable_destination("--snapshot", config.snapshot);
  sg::check_writable_destination("--log", config.log);
  sg::check_writable_destination("--ddp-trace", config.ddp_trace);
  // Mixed precision (docs/amp.md): the forward runs in an autocast region with --amp f16 or bf16,
  // and f16 also scales the loss (bf16 has f32's range and needs no scaler).
  sg::dist::AcceleratorOptions options;
  options.ddp.trace_path = config.ddp_trace;
  options.ddp.bucket_cap_mb = config.bucket_mb;
  options.ddp.check_replicas_every = config.check_replicas_every;
  options.comm_hook = config.comm_hook;
  options.zero_shard_gradients = config.zero_shard_gradients;
  options.sync_batchnorm = config.sync_bn;
  options.mixed_precision = config.amp == "none" ? "no" : config.amp;
  SG_CHECK(!config.amp_debug || config.amp == "f16", "--amp-debug reports on the f16 loss scaler: it needs --amp f16, ",
           "got --amp ", config.amp);
  options.amp_diagnostics = config.amp_debug;
  options.device = config.device;
  options.gradient_accumulation_steps = config.gradient_accumulation_steps;
  options.project_config = config.step_snapshots.project(config.snapshot);
  sg::dist::Accelerator accelerator(options);
  if (!config.tensorboard.empty()) accelerator.init_trackers(config.tensorboard);  // before the data: fail fast
  sg::set_num_threads(config.threads);
  sg::manual_seed(config.seed);
  const sg::data::Transform normalize =
      sg::data::Normalize({sg::data::FashionMNIST::kMean}, {sg::data::FashionMNIST::kStd});
  const auto train_set =
      first_examples(std::make_shared<sg::data::FashionMNIST>(config.data_dir, true, normalize), config.train_subset);
  const auto test_set =
      first_examples(std::make_shared<sg::data::FashionMNIST>(config.data_dir, false, normalize), config.test_subset);
  // --batch-size is per process: N processes train on N * batch-size images per step. Batches
  // arrive on the accelerator's device; for a GPU they are staged in page-locked memory.
  const bool pin_memory = accelerator.device().is_cuda();
  sg::data::DataLoader train_loader = accelerator.prepare(train_set, {.batch_size = config.batch_size,
                                                                      .shuffle = true,
                                                                      .num_workers = config.workers,
                                                                      .seed = config.seed,
                                                                      .pin_memory = pin_memory});
  sg::data::DataLoader test_loader =
      accelerator.prepare(test_set, {.batch_size = 1000, .num_workers = config.workers, .pin_memory = pin_memory});

  std::shared_ptr<sg::nn::Module> model = sg::models::make_fashion_mnist_model(config.model);
  const double flops_per_image = static_cast<double>(sg::nn::training_flops(*model, sg::zeros({1, 1, 28, 28})));
  model = accelerator.prepare(model);
  auto optimizer = make_optimizer(config, model->parameters());
  if (config.zero && accelerator.num_processes() > 1)
    optimizer = std::make_unique<sg::dist::ZeroRedundancyOptimizer>(std::move(optimizer));
  accelerator.prepare(*optimizer);
  std::unique_ptr<sg::optim::LRScheduler> scheduler;
  if (config.scheduler == "cosine") {  // stepped once per optimizer step over the whole run
    scheduler = std::make_unique<sg::optim::CosineAnnealingLR>(
        *optimizer, config.epochs * accelerator.optimizer_steps_per_epoch(train_loader));
    accelerator.prepare(*scheduler);
  }

  int start_epoch = 0;
  int64_t step = 0;
  const std::string newest_snapshot = sg::dist::snapshot_to_resume(accelerator, config.snapshot);
  const std::string resume_from = newest_snapshot.empty() ? config.resume : newest_snapshot;
  if (!resume_from.empty()) {
    const auto metadata = accelerator.load_state(resume_from, *model);
    start_epoch = static_cast<int>(sg::optim::metadata_integer(metadata, "epoch", resume_from, 0, config.epochs));
    step = sg::optim::metadata_integer(metadata, "step", resume_from, 0, std::numeric_limits<int64_t>::max());
    accelerator.print("resumed from ", resume_from, " after epoch ", start_epoch, " (step ", step, ")");
  }
  const sg::dist::ModelFlopsUtilization mfu(accelerator, flops_per_image);
  accelerator.print(config.model, ": ", sg::models::count_parameters(accelerator.unwrap_model(*model)), " parameters, ",
                    train_set->size(), " training / ", test_set->size(), " test images, ", accelerator.num_processes(),
                    " process(es) x ", config.threads, " thread(s) on ", accelerator.device(), ", ", config.batch_size,
                    " images per process and ", sg::dist::batch_note(accelerator.gradient_accumulation_steps()),
                    mfu.peak_note(), sg::dist::zero_sharding_note(*optimizer, config.optimizer == "sgd" ? 1 : 2));

  const sg::amp::GradScaler& scaler = accelerator.scaler();
  std::vector<std::string> log_columns{"step", "epoch", "loss", "lr", "accuracy"};
  if (scaler.is_enabled()) log_columns.insert(log_columns.end(), {"scale", "skipped_steps"});
  sg::data::MetricsLog log(accelerator.is_main_process() ? config.log : "", log_columns);
  std::FILE* progress_out = accelerator.is_main_process() ? stderr : nullptr;
  sg::dist::NonfiniteLossGuard nonfinite_guard(config.max_nonfinite_steps, "--max-nonfinite-steps", &accelerator);
  sg::profiler::StepProfiler profiler(config.profile, accelerator.process_index(), accelerator.num_processes());
  sg::dist::report_steps_across_ranks(profiler, config.profile);  // DIR/step_report.txt under sgrun
  for (int epoch = start_epoch; epoch < config.epochs; ++epoch) {
    train_loader.set_epoch(epoch);
    sg::data::ProgressBar bar(accelerator.optimizer_steps_in_next_pass(train_loader),
                              "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config.epochs), "img",
                              progress_out);
    for (const sg::data::Batch& batch : train_loader) {
      const auto accumulation = accelerator.accumulate(*model);  // one step per --gradient-accumulation-steps
      sg::Tensor loss;
      {
        const sg::amp::AutocastGuard autocast = accelerator.autocast();
        loss = loss_of(config, (*model)(batch.input), batch.target);
      }
      accelerator.backward(loss);
      // This process's micro-batch's mean (backward weighs a copy); the main rank shows its own.
      const double loss_value = loss.item();
      const int64_t images = batch.input.size(0) * accelerator.num_processes();
      if (!accelerator.sync_gradients()) {  // the gradients add up until the accumulation's last micro-batch
        nonfinite_guard.add_micro_batch_loss(loss_value);
        bar.update(0, images, {{"loss", loss_value}});
        continue;
      }
      accelerator.step(*optimizer);
      if (scheduler) scheduler->step();
      accelerator.zero_grad(*optimizer);
      ++step;
      profiler.step();
      std::map<std::string, std::string> row{{"step", std::to_string(step)},
                                             {"epoch", std::to_string(epoch + 1)},
                                             {"loss", std::to_string(loss_value)},
                                             {"lr", std::to_string(optimizer->lr(0))}};
      std::vector<std::pair<std::string, double>> shown{{"loss", loss_value}};
      std::map<std::string, double> scalars{{"loss/train", loss_value}, {"lr", optimizer->lr(0)}};
      if (scaler.is_enabled()) {
        scalars["amp/loss_scale"] = scaler.get_scale();
        if (const sg::amp::ScalerDiagnostics* diagnostics = scaler.diagnostics())
          scalars.merge(diagnostics->underflow_scalars());
        row["scale"] = std::to_string(scaler.get_scale());
        row["skipped_steps"] = std::to_string(scaler.skipped_steps());
        shown.insert(shown.end(),
                     {{"scale", scaler.get_scale()}, {"skipped", static_cast<double>(scaler.skipped_steps())}});
      }
      bar.update(1, images, shown);
      log.write(row);
      accelerator.log(scalars, step);
      nonfinite_guard.observe(loss_value, step);  // Note [Stopping on a non-finite loss]
      if (config.step_snapshots.due(step)) {      // resumes inside this epoch
        nonfinite_guard.check_before_saving(accelerator.unwrap_model(*model), config.snapshot + ".steps", step);
        accelerator.save_state(
            *model, {{"epoch", std::to_string(epoch)}, {"step", std::to_string(step)}, {"model", config.model}});
      }
    }
    bar.finish();
    const double train_seconds = bar.elapsed_seconds(), images_per_second = bar.items_per_second();
    Evaluation result;
    {
      const sg::amp::AutocastGuard autocast = accelerator.autocast();
      result = evaluate(config, accelerator, *model, test_loader);
    }
    accelerator.print("epoch ", epoch + 1, ": test loss ", sg::fixed_text(result.loss, 4), ", test accuracy ",
                      sg::fixed_text(result.accuracy, 2), "% (training ", sg::fixed_text(train_seconds, 1), " s, ",
                      sg::fixed_text(images_per_second, 0), " img/s on ", accelerator.device(),
                      mfu.progress_note(images_per_second), ")");
    log.write({{"step", std::to_string(step)},
               {"epoch", std::to_string(epoch + 1)},
               {"loss", std::to_string(result.loss)},
               {"accuracy", std::to_string(result.accuracy)}});
    accelerator.log({{"loss/test", result.loss}, {"accuracy/test", result.accuracy}}, step);
    const sg::optim::Metadata metadata = {
        {"epoch", std::to_string(epoch + 1)}, {"step", std::to_string(step)}, {"model", config.model}};
    for (const std::string& path : {config.save, config.snapshot}) {
      if (path.empty()) continue;
      nonfinite_guard.check_before_saving(accelerator.unwrap_model(*model), path, step);
      accelerator.save_state(path, *model, metadata);
    }
  }
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"Train a CNN on Fashion-MNIST (syncgrad)"};
  app.add_option("--data-dir", config.data_dir, "Directory with the Fashion-MNIST IDX files (.gz or raw)")
      ->capture_default_str();
  app.add_option("--model", config.model, "cnn (conv-BN-ReLU-pool x2, 2 linear) or basicnet (PyTorch MNIST example)")
      ->check(CLI::IsMember({"cnn", "basicnet"}))
      ->capture_default_str();
  app.add_option("--epochs", config.epochs, "Passes over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", config.batch_size, "Images per micro-batch and process")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--gradient-accumulation-steps", config.gradient_accumulation_steps,
                 "Micro-batches whose gradients add up before each optimizer step (and --scheduler step)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", config.lr, "Learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--optimizer", config.optimizer, "adam, adamw, or sgd (momentum 0.9)")
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}))
      ->capture_default_str();
  app.add_option("--scheduler", config.scheduler, "none, or cosine (annealed to 0 over all steps)")
      ->check(CLI::IsMember({"none", "cosine"}))
      ->capture_default_str();
  app.add_option("--threads", config.threads, "Intra-op threads (OpenMP and OpenBLAS)")
      ->check(CLI::Range(1, kMaxThreads))
      ->capture_default_str();
  app.add_option("--seed", config.seed, "Seed for initialisation, shuffling and dropout")->capture_default_str();
  app.add_option("--workers", config.workers, "Data-loader worker threads (0: load on the training thread)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--save", config.save,
                 "Write a checkpoint (safetensors) here after every epoch (its directory must exist; checked at "
                 "start)");
  app.add_option("--resume", config.resume, "Continue from a checkpoint written by --save")->check(CLI::ExistingFile);
  app.add_option("--snapshot", config.snapshot,
                 "Save model, optimizer, scheduler, RNG and epoch here after every epoch (atomically) and resume from "
                 "it when it exists at start: with `sgrun --max-restarts` a killed run finishes");
  config.step_snapshots.add_to(app);
  app.add_option("--amp", config.amp, "Mixed precision: none, f16 (autocast + loss scaler) or bf16 (autocast)")
      ->check(CLI::IsMember({"none", "f16", "bf16"}))
      ->capture_default_str();
  app.add_flag("--amp-debug", config.amp_debug,
               "With --amp f16: when the loss scaler skips a step, name the parameters whose gradients held inf/NaN "
               "and the rank they began on; log each parameter's f16 underflow fraction (amp/underflow/<name>); at "
               "the end, say which layers would be safer in f32 or bf16 (docs/amp.md)");
  app.add_option("--device", config.device,
                 "auto (the GPU of each process's LOCAL_RANK when CUDA is available, else the CPU), cpu, or cuda; "
                 "under sgrun on GPUs: one GPU per process, gradients all-reduced over NCCL")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--sync-bn", config.sync_bn,
               "Under sgrun: BatchNorm statistics over all processes' batches (SyncBatchNorm)");
  add_bucket_mb_option(app, config.bucket_mb);
  add_comm_hook_option(app, config.comm_hook);
  add_zero_shard_gradients_flag(app, config.zero_shard_gradients, add_zero_flag(app, config.zero));
  app.add_option(
         "--check-replicas-every", config.check_replicas_every,
         "Under sgrun: every N steps, and before --save and --snapshot write, compare the processes' weights, buffers "
         "(and optimizer state at a snapshot) and stop all of them naming the first tensor that differs "
         "(0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(
      "--ddp-trace", config.ddp_trace,
      "Under sgrun: write a Chrome trace (ui.perfetto.dev) of the first backwards and DDP's bucket all-reduces");
  app.add_option("--profile", config.profile,
                 "Profile steps 2-6 into DIR: trace.json (ui.perfetto.dev) and key_averages.txt, per rank under "
                 "sgrun (docs/profiling.md)");
  app.add_option("--log", config.log, "CSV of step, epoch, loss, lr, accuracy");
  app.add_option("--tensorboard", config.tensorboard,
                 "Write TensorBoard event files into this directory (created when missing; by the main process): "
                 "loss/train and lr per step, amp/loss_scale under --amp f16 (and amp/underflow/<param> with "
                 "--amp-debug), loss/test and accuracy/test per epoch");
  app.add_option("--train-subset", config.train_subset, "Train on the first N images only (0: all), for quick runs")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--test-subset", config.test_subset,
                 "Evaluate on the first N test images only (0: all), for quick runs")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-nonfinite-steps", config.max_nonfinite_steps,
                 "Stop with an error after N consecutive steps whose loss is inf or NaN (0: never). Steps the f16 "
                 "loss scaler skips for overflowing gradients do not count; --save and --snapshot are never "
                 "overwritten with inf or NaN weights")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(config);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "train_cnn: %s\n", error.what());
    return 1;
  }
}
