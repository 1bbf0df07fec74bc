// train_resnet: the classic ResNet fine-tuning recipe (pytorch_classification/Test5_resnet's
// train.py: resnet34 on a folder of flower photos) as one program. It splits an image folder per
// class into training and validation images, trains a torchvision-named ResNet with SGD (momentum
// 0.9, weight decay 0.005) under the recipe's cosine LambdaLR stepped per epoch, optionally from
// pretrained weights with the head dropped and everything but fc frozen, and prints the validation
// accuracy after every epoch. The same program runs on one process or, under
// `sgrun --nproc-per-node N`, data-parallel on N (Gloo on the CPU, NCCL on GPUs); --snapshot lets
// `sgrun --max-restarts` finish a run whose worker died. docs/resnet.md has the recipe and the
// flags; `train_resnet --help` lists them.
//
// Test hook: SG_TEST_KILL_AT_STEP stops a worker after a given step (apps/test_hooks.h).
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <optional>
#include <string>

#include "apps/ddp_flags.h"
#include "apps/step_snapshot_flags.h"
#include "apps/test_hooks.h"
#include "core/atomic_file.h"
#include "core/number_text.h"
#include "data/dataloader.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"
#include "data/transforms.h"
#include "dist/dist.h"
#include "dist/step_report.h"
#include "log/progress_bar.h"
#include "log/step_profiler.h"
#include "models/cnn.h"
#include "models/resnet.h"
#include "nn/flop_count.h"
#include "nn/functional.h"
#include "optim/checkpoint.h"
#include "optim/fine_tuning_weights.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "syncgrad.h"
#include "train/accelerator.h"
#include "train/model_flops_utilization.h"
#include "train/nonfinite_loss.h"

namespace {

struct Config {
  std::string data_path;
  std::string model = "resnet34";
  int64_t num_classes = 5;
  int epochs = 30;
  int64_t batch_size = 16;  // per process
  int gradient_accumulation_steps = 1;
  bool checkpoint_activations = false;
  double lr = 0.001;
  double lrf = 0.1;  // the final lr as a fraction of --lr
  double weight_decay = 0.005;
  bool scale_lr = false;
  std::string weights;
  bool freeze_layers = false;
  bool sync_bn = false;
  std::string comm_hook = "no";
  int64_t image_size = 224;
  double val_fraction = 0.2;
  int workers = 0;
  std::string amp = "none";
  bool amp_debug = false;  // f16: the loss scaler's diagnostics (amp/scaler_diagnostics.h)
  std::string device = "auto";
  int threads = 1;
  uint64_t seed = 0;
  std::string snapshot;
  StepSnapshotFlags step_snapshots;  // --save-every-steps, --keep
  std::string save_dir;
  std::string tensorboard;
  std::string profile;          // directory for the profile of steps 2-6
  int max_nonfinite_steps = 5;  // 0: train on whatever the loss is
};

constexpr int kMaxThreads = 1024;

// ImageNet's channel statistics, which the recipe (and any torchvision-pretrained weights) assumes.
const std::vector<double> kImageNetMean = {0.485, 0.456, 0.406};
const std::vector<double> kImageNetStd = {0.229, 0.224, 0.225};

// The recipe's lr factor for epoch e of E: ((1 + cos(pi e / E)) / 2) (1 - lrf) + lrf, a half cosine
// from 1 at the first epoch down towards lrf (reached after the last).
double cosine_factor(int64_t epoch, int epochs, double lrf) {
  return (1 + std::cos(static_cast<double>(epoch) * std::numbers::pi / epochs)) / 2 * (1 - lrf) + lrf;
}

// The recipe's --freeze-layers: every parameter outside the head stops learning. Returns the
// ones that still learn, the only ones the optimizer gets (so frozen ones carry no momentum).
sg::TensorList freeze_all_but_fc(sg::nn::Module& model, bool freeze) {
  sg::TensorList trainable;
  for (auto& [name, param] : model.named_parameters()) {
    if (freeze && !name.starts_with("fc.")) param.requires_grad_(false);
    if (param.requires_grad()) trainable.push_back(param);
  }
  return trainable;
}

// Every rank classifies its share of the validation images; each batch's per-image results are
// gathered without the images the sampler repeated to pad the shares (the recipe counts those),
// so the accuracy is over exactly the validation set. Returns the number of correct images.
int64_t count_correct(sg::dist::Accelerator& accelerator, sg::nn::Module& model, sg::data::DataLoader& loader) {
  sg::NoGradGuard no_grad;
  model.eval();
  double correct = 0;
  {
    const sg::amp::AutocastGuard autocast = accelerator.autocast();
    for (const sg::data::Batch& batch : loader) {
      const sg::Tensor hits = sg::eq(sg::argmax(model(batch.input), 1), batch.target).to(sg::DType::f32);
      correct += accelerator.gather_for_metrics(hits).sum().item();
    }
  }
  model.train();
  return std::llround(correct);
}

// The mean of the epoch's batch losses over every rank's batches (the recipe's reduce_value);
// none when no rank ran a batch (an epoch resumed from a snapshot taken at its last step).
std::optional<double> mean_over_ranks(sg::dist::Accelerator& accelerator, double loss_sum, int64_t batches) {
  double totals[2] = {loss_sum, static_cast<double>(batches)};
  if (accelerator.num_processes() > 1) {
    sg::Tensor summed =
        sg::tensor(std::vector<double>{loss_sum, static_cast<double>(batches)}, {2}).to(accelerator.device());
    sg::dist::all_reduce(summed);
    const sg::Tensor host = summed.to(sg::Device::cpu()).contiguous();
    totals[0] = host.data_ptr<double>()[0];
    totals[1] = host.data_ptr<double>()[1];
  }
  if (totals[1] == 0) return std::nullopt;
  return totals[0] / totals[1];
}

int run(const Config& config) {
  sg::check_writable_destination("--snapshot", config.snapshot);
  sg::dist::AcceleratorOptions options;
  options.sync_batchnorm = config.sync_bn;
  options.comm_hook = config.comm_hook;
  options.mixed_precision = config.amp == "none" ? "no" : config.amp;
  SG_CHECK(!config.amp_debug || config.amp == "f16", "--amp-debug reports on the f16 loss scaler: it needs --amp f16, ",
           "got --amp ", config.amp);
  options.amp_diagnostics = config.amp_debug;
  options.device = config.device;
  options.gradient_accumulation_steps = config.gradient_accumulation_steps;
  options.project_config = config.step_snapshots.project(config.snapshot);
  sg::dist::Accelerator accelerator(options);
  const bool is_main = accelerator.is_main_process();
  if (!config.save_dir.empty() && is_main) {
    std::error_code error;
    std::filesystem::create_directories(config.save_dir, error);
    SG_CHECK(!error && ::access(config.save_dir.c_str(), W_OK | X_OK) == 0, "--save-dir ", config.save_dir,
             ": cannot create or write to it", error ? " (" + error.message() + ")" : std::string());
  }
  if (!config.tensorboard.empty()) accelerator.init_trackers(config.tensorboard);  // before the data: fail fast
  sg::set_num_threads(config.threads);
  sg::manual_seed(config.seed);

  // The recipe's read_split_data (fixed by --seed); the main rank reports the counts and, with
  // --save-dir, writes class_indices.json.
  const sg::data::ImageFolderSplit split =
      sg::data::split_image_folder(config.data_path, config.val_fraction, config.seed,
                                   is_main && !config.save_dir.empty() ? config.save_dir + "/class_indices.json" : "",
                                   is_main ? &std::cout : nullptr);
  SG_CHECK(static_cast<int64_t>(split.classes.size()) == config.num_classes, "--data-path ", config.data_path, " has ",
           split.classes.size(), " class folders but --num-classes is ", config.num_classes);
  SG_CHECK(!split.train.empty() && !split.val.empty(), "--data-path ", config.data_path, " with --val-fraction ",
           config.val_fraction, " leaves ", split.train.size(), " training and ", split.val.size(),
           " validation images; both need at least one");
  // The recipe's transforms at --image-size S: train RandomResizedCrop(S) + flip, validation
  // Resize(S * 256 / 224) + CenterCrop(S) (256 and 224 at the default size).
  const sg::data::Normalize normalize(kImageNetMean, kImageNetStd);
  const int64_t size = config.image_size;
  const sg::data::Compose train_transform(
      {sg::data::RandomResizedCrop(size), sg::data::RandomHorizontalFlip(), sg::data::ToTensor(), normalize});
  const sg::data::Compose val_transform(
      {sg::data::Resize(size * 256 / 224), sg::data::CenterCrop(size), sg::data::ToTensor(), normalize});
  const auto train_set = std::make_shared<sg::data::ImageFolder>(split.train, split.classes, train_transform);
  const auto val_set = std::make_shared<sg::data::ImageFolder>(split.val, split.classes, val_transform);
  const bool pin_memory = accelerator.device().is_cuda();
  sg::data::DataLoader train_loader = accelerator.prepare(train_set, {.batch_size = config.batch_size,
                                                                      .shuffle = true,
                                                                      .num_workers = config.workers,
                                                                      .seed = config.seed,
                                                                      .pin_memory = pin_memory});
  sg::data::DataLoader val_loader = accelerator.prepare(
      val_set, {.batch_size = config.batch_size, .num_workers = config.workers, .pin_memory = pin_memory});

  std::shared_ptr<sg::models::ResNet> resnet =
      sg::models::make_resnet(config.model, {.num_classes = config.num_classes});
  if (!config.weights.empty()) {  // before prepare(): rank 0's weights are what DDP broadcasts
    const sg::nn::PretrainedReport report = sg::optim::load_fine_tuning_weights(*resnet, config.weights, "fc.");
    accelerator.print("--weights ", config.weights, ": ", report.str());
  }
  resnet->activation_checkpointing = config.checkpoint_activations;
  const sg::TensorList trainable = freeze_all_but_fc(*resnet, config.freeze_layers);
  const double flops_per_image = static_cast<double>(sg::nn::training_flops(*resnet, sg::zeros({1, 3, size, size})));
  std::shared_ptr<sg::nn::Module> model = accelerator.prepare(resnet);
  // --batch-size is per process; the recipe's multi-GPU script scales the lr with the processes.
  const double lr = config.scale_lr ? config.lr * accelerator.num_processes() : config.lr;
  sg::optim::SGD optimizer(trainable, {.lr = lr, .momentum = 0.9, .weight_decay = config.weight_decay});
  accelerator.prepare(optimizer);
  sg::optim::LambdaLR scheduler(optimizer,
                                [&config](int64_t epoch) { return cosine_factor(epoch, config.epochs, config.lrf); });
  accelerator.prepare(scheduler);

  int start_epoch = 0;
  int64_t step = 0;
  if (const std::string resume_from = sg::dist::snapshot_to_resume(accelerator, config.snapshot);
      !resume_from.empty()) {
    const sg::optim::Metadata metadata = accelerator.load_state(resume_from, *model);
    const auto saved_model = metadata.find("model");
    SG_CHECK(saved_model != metadata.end() && saved_model->second == config.model, "--snapshot ", resume_from,
             " was written for ", saved_model == metadata.end() ? "another program" : saved_model->second,
             ", not --model ", config.model, "; move it away to start afresh");
    start_epoch = static_cast<int>(sg::optim::metadata_integer(metadata, "epoch", resume_from, 0, config.epochs));
    step = sg::optim::metadata_integer(metadata, "step", resume_from, 0, std::numeric_limits<int64_t>::max());
    accelerator.print("resumed from ", resume_from, " after epoch ", start_epoch, " (step ", step, ")");
  }
  int64_t trainable_count = 0;
  for (const sg::Tensor& param : trainable) trainable_count += param.numel();
  const sg::dist::ModelFlopsUtilization mfu(accelerator, flops_per_image);
  accelerator.print(
      config.model, ": ", sg::models::count_parameters(*resnet), " parameters (", trainable_count, " trained), ",
      train_set->size(), " training / ", val_set->size(), " validation images at ", size, "x", size, ", ",
      accelerator.num_processes(), " process(es) x ", config.threads, " thread(s) on ", accelerator.device(), ", ",
      config.batch_size, " images per process and ", sg::dist::batch_note(accelerator.gradient_accumulation_steps()),
      ", lr ", lr,
      config.checkpoint_activations ? ", activation checkpointing (each block recomputed in backward)" : "",
      mfu.peak_note());

  std::FILE* progress_out = is_main ? stderr : nullptr;
  sg::dist::NonfiniteLossGuard nonfinite_guard(config.max_nonfinite_steps, "--max-nonfinite-steps", &accelerator);
  sg::profiler::StepProfiler profiler(config.profile, accelerator.process_index(), accelerator.num_processes());
  sg::dist::report_steps_across_ranks(profiler, config.profile);  // DIR/step_report.txt under sgrun
  for (int epoch = start_epoch; epoch < config.epochs; ++epoch) {
    train_loader.set_epoch(epoch);
    const double epoch_lr = optimizer.lr(0);
    const std::string label = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config.epochs);
    sg::data::ProgressBar bar(accelerator.optimizer_steps_in_next_pass(train_loader), label, "img", progress_out);
    double loss_sum = 0;
    int64_t batches_run = 0;  // fewer than train_loader.size() in an epoch resumed part-way
    for (const sg::data::Batch& batch : train_loader) {
      const auto accumulation = accelerator.accumulate(*model);  // one step per --gradient-accumulation-steps
      sg::Tensor loss;
      {
        const sg::amp::AutocastGuard autocast = accelerator.autocast();
        loss = sg::nn::functional::cross_entropy((*model)(batch.input), batch.target);
      }
      accelerator.backward(loss);
      const double loss_value = loss.item();  // this micro-batch's mean (backward weighs a copy)
      loss_sum += loss_value;
      ++batches_run;
      const bool ends_step = accelerator.sync_gradients();
      bar.update(ends_step ? 1 : 0, batch.input.size(0) * accelerator.num_processes(), {{"loss", loss_value}});
      if (!ends_step) {  // the gradients add up until the accumulation's last micro-batch
        nonfinite_guard.add_micro_batch_loss(loss_value);
        continue;
      }
      accelerator.step(optimizer);
      accelerator.zero_grad(optimizer);
      ++step;
      profiler.step();
      nonfinite_guard.observe(loss_value, step);  // Note [Stopping on a non-finite loss]
      if (config.step_snapshots.due(step)) {      // resumes inside this epoch
        nonfinite_guard.check_before_saving(accelerator.unwrap_model(*model), config.snapshot + ".steps", step);
        accelerator.save_state(
            *model, {{"epoch", std::to_string(epoch)}, {"step", std::to_string(step)}, {"model", config.model}});
      }
      maybe_kill_for_test(step, accelerator.process_index());
    }
    bar.finish();
    scheduler.step();
    const std::optional<double> train_loss = mean_over_ranks(accelerator, loss_sum, batches_run);
    const int64_t correct = count_correct(accelerator, *model, val_loader);
    const double accuracy = 100.0 * static_cast<double>(correct) / static_cast<double>(val_set->size());
    accelerator.print("epoch ", epoch + 1, "/", config.epochs, ": train loss ",
                      train_loss ? sg::fixed_text(*train_loss, 4) : std::string("- (no batch was left to run)"),
                      ", val accuracy ", sg::fixed_text(accuracy, 2), "% (", correct, "/", val_set->size(), "), lr ",
                      epoch_lr, " (", sg::fixed_text(bar.elapsed_seconds(), 1), " s, ",
                      sg::fixed_text(bar.items_per_second(), 1), " img/s", mfu.progress_note(bar.items_per_second()),
                      ")");
    std::map<std::string, double> scalars{{"accuracy", accuracy / 100.0}, {"learning_rate", epoch_lr}};
    if (train_loss) scalars["loss"] = *train_loss;
    if (const sg::amp::ScalerDiagnostics* diagnostics = accelerator.scaler().diagnostics())
      scalars.merge(diagnostics->underflow_scalars());  // the epoch's last step
    accelerator.log(scalars, epoch);
    const sg::nn::Module& weights = accelerator.unwrap_model(*model);
    if (!config.save_dir.empty()) {  // the recipe's weights/model-{epoch}.pth
      const std::string path = config.save_dir + "/model-" + std::to_string(epoch) + ".safetensors";
      nonfinite_guard.check_before_saving(weights, path, step);
      if (is_main) sg::optim::save_checkpoint(path, weights);
    }
    if (!config.snapshot.empty()) {
      nonfinite_guard.check_before_saving(weights, config.snapshot, step);
      accelerator.save_state(
          config.snapshot, *model,
          {{"epoch", std::to_string(epoch + 1)}, {"step", std::to_string(step)}, {"model", config.model}});
    }
  }
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"Fine-tune a ResNet on an image folder, one folder per class (syncgrad)"};
  app.add_option("--data-path", config.data_path, "The image folder: one sub-folder of images per class")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--model", config.model, "resnet18, resnet34 or resnet50 (torchvision's)")
      ->check(CLI::IsMember({"resnet18", "resnet34", "resnet50"}))
      ->capture_default_str();
  app.add_option("--num-classes", config.num_classes, "Class folders in --data-path (the size of fc)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--epochs", config.epochs, "Passes over the training images")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", config.batch_size, "Images per micro-batch and process")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--gradient-accumulation-steps", config.gradient_accumulation_steps,
                 "Micro-batches whose gradients add up before each optimizer step: a step then sees K x --batch-size "
                 "images per process in K x less memory")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--checkpoint-activations", config.checkpoint_activations,
               "Keep only each residual block's input and recompute the block in backward: less memory, about a "
               "third more time; BatchNorm statistics move once per step as without (docs/memory.md)");
  app.add_option("--lr", config.lr, "Initial learning rate (SGD, momentum 0.9)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lrf", config.lrf, "Final learning rate as a fraction of --lr (cosine per epoch)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--weight-decay", config.weight_decay, "SGD's L2 penalty")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--scale-lr", config.scale_lr, "Multiply --lr by the number of processes (the recipe's multi-GPU rule)");
  app.add_option(
         "--weights", config.weights,
         "Start from these weights: a safetensors state_dict of --model (scripts/convert-torchvision-weights.py "
         "makes torchvision's) or a checkpoint of this program (--save-dir, --snapshot). fc may differ (the "
         "1000-class head is dropped); any other tensor that does not load is an error")
      ->check(CLI::ExistingFile);
  app.add_flag("--freeze-layers", config.freeze_layers, "Train fc only; every other parameter keeps its value");
  app.add_flag("--sync-bn", config.sync_bn,
               "Under sgrun: BatchNorm statistics over all processes' batches (SyncBatchNorm)");
  app.add_option("--image-size", config.image_size,
                 "Training crop size; validation resizes to size * 256 / 224, then crops the centre")
      ->check(CLI::Range(int64_t{16}, int64_t{4096}))
      ->capture_default_str();
  app.add_option("--val-fraction", config.val_fraction, "Share of each class's images kept for validation")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--workers", config.workers, "Data-loader worker threads (0: load on the training thread)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_comm_hook_option(app, config.comm_hook);
  app.add_option("--amp", config.amp, "Mixed precision: none, f16 (autocast + loss scaler) or bf16 (autocast)")
      ->check(CLI::IsMember({"none", "f16", "bf16"}))
      ->capture_default_str();
  app.add_flag("--amp-debug", config.amp_debug,
               "With --amp f16: when the loss scaler skips a step, name the parameters whose gradients held inf/NaN "
               "and the rank they began on; log each parameter's f16 underflow fraction (amp/underflow/<name>, per "
               "epoch); at the end, say which layers would be safer in f32 or bf16 (docs/amp.md)");
  app.add_option("--device", config.device,
                 "auto (the GPU of each process's LOCAL_RANK when CUDA is available, else the CPU), cpu, or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--threads", config.threads, "Intra-op threads per process")
      ->check(CLI::Range(1, kMaxThreads))
      ->capture_default_str();
  app.add_option("--seed", config.seed, "Seed of the split, the initialisation, shuffling and augmentation")
      ->capture_default_str();
  app.add_option("--snapshot", config.snapshot,
                 "Save model, optimizer, scheduler, RNG and epoch here after every epoch (atomically) and resume from "
                 "it when it exists at start: with `sgrun --max-restarts` a killed run finishes");
  config.step_snapshots.add_to(app);
  app.add_option("--save-dir", config.save_dir,
                 "Write the model after every epoch as DIR/model-<epoch>.safetensors (from 0, as the recipe), and "
                 "DIR/class_indices.json (created when missing)");
  app.add_option("--tensorboard", config.tensorboard,
                 "Write TensorBoard event files into this directory (by the main process): loss (mean training "
                 "loss), accuracy (validation, 0..1) and learning_rate per epoch, as the recipe");
  app.add_option("--profile", config.profile,
                 "Write a profile of steps 2-6 into this directory: trace.json and key_averages.txt (one of each "
                 "per rank under sgrun; docs/profiling.md)");
  app.add_option("--max-nonfinite-steps", config.max_nonfinite_steps,
                 "Stop with an error after N consecutive steps whose loss is inf or NaN (0: never; the recipe stops "
                 "at the first, as 1 does). Steps the f16 loss scaler skips for overflowing gradients do not count; "
                 "--save-dir and --snapshot files are never written from inf or NaN weights")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(config);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "train_resnet: %s\n", error.what());
    return 1;
  }
}
