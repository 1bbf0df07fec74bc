// train_cnn: trains the Fashion-MNIST CNN (or BasicNet) on one process and reports the test
// accuracy after every epoch. `train_cnn --help` lists the flags.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "data/metrics_log.h"
#include "data/progress_bar.h"
#include "models/cnn.h"
#include "nn/functional.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "syncgrad.h"

namespace {

struct Config {
  std::string data_dir = sg::data::FashionMNIST::kDefaultRoot;
  std::string model = "cnn";
  int epochs = 4;
  int64_t batch_size = 64;
  double lr = 0.005;
  std::string optimizer = "adam";
  std::string scheduler = "none";
  int threads = 1;
  uint64_t seed = 0;
  int workers = 0;
  std::string save;
  std::string resume;
  std::string log;
  int64_t train_subset = 0;  // 0: the whole training set
  std::string amp = "none";  // none, f16 or bf16
};

// Mixed precision (docs/amp.md): the forward runs in an autocast region when --amp is f16 or bf16,
// and f16 also scales the loss (bf16 has f32's range and needs no scaler).
struct MixedPrecision {
  explicit MixedPrecision(const std::string& amp)
      : enabled(amp != "none"), dtype(amp == "bf16" ? sg::DType::bf16 : sg::DType::f16),
        scaler({.enabled = amp == "f16"}) {}
  sg::amp::AutocastGuard region() const { return sg::amp::AutocastGuard(dtype, enabled); }

  bool enabled;
  sg::DType dtype;
  sg::amp::GradScaler scaler;
};

std::unique_ptr<sg::optim::Optimizer> make_optimizer(const Config& config, const sg::TensorList& params) {
  if (config.optimizer == "adam") return std::make_unique<sg::optim::Adam>(params, sg::optim::AdamOptions{.lr = config.lr});
  if (config.optimizer == "adamw") return std::make_unique<sg::optim::AdamW>(params, sg::optim::AdamWOptions{.lr = config.lr});
  return std::make_unique<sg::optim::SGD>(params, sg::optim::SGDOptions{.lr = config.lr, .momentum = 0.9});
}

// The loss of a batch: BasicNet ends in log_softmax (so NLL), the CNN gives logits.
sg::Tensor loss_of(const Config& config, const sg::Tensor& output, const sg::Tensor& target) {
  return config.model == "basicnet" ? sg::nn::functional::nll_loss(output, target)
                                    : sg::nn::functional::cross_entropy(output, target);
}

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

Evaluation evaluate(const Config& config, sg::nn::Module& model, sg::data::DataLoader& loader) {
  sg::NoGradGuard no_grad;
  model.eval();
  double total_loss = 0;
  int64_t correct = 0, seen = 0;
  for (const sg::data::Batch& batch : loader) {
    const sg::Tensor output = model(batch.input);
    const int64_t n = batch.target.size(0);
    total_loss += loss_of(config, output, batch.target).item() * static_cast<double>(n);
    correct += sg::eq(sg::argmax(output, 1), batch.target).sum().item<int64_t>();
    seen += n;
  }
  model.train();
  return {total_loss / static_cast<double>(seen), 100.0 * static_cast<double>(correct) / static_cast<double>(seen)};
}

int run(const Config& config) {
  sg::set_num_threads(config.threads);
  sg::manual_seed(config.seed);
  const sg::data::Transform normalize =
      sg::data::Normalize({sg::data::FashionMNIST::kMean}, {sg::data::FashionMNIST::kStd});
  std::shared_ptr<const sg::data::Dataset> train_set =
      std::make_shared<sg::data::FashionMNIST>(config.data_dir, true, normalize);
  if (config.train_subset > 0) {
    std::vector<int64_t> indices(std::min(config.train_subset, train_set->size()));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
    train_set = std::make_shared<sg::data::Subset>(train_set, indices);
  }
  auto test_set = std::make_shared<sg::data::FashionMNIST>(config.data_dir, false, normalize);
  sg::data::DataLoader train_loader(train_set, {.batch_size = config.batch_size, .shuffle = true,
                                                .num_workers = config.workers, .seed = config.seed});
  sg::data::DataLoader test_loader(test_set, {.batch_size = 1000, .num_workers = config.workers});

  std::shared_ptr<sg::nn::Module> model = sg::models::make_fashion_mnist_model(config.model);
  auto optimizer = make_optimizer(config, model->parameters());
  std::unique_ptr<sg::optim::LRScheduler> scheduler;
  if (config.scheduler == "cosine")  // stepped once per iteration over the whole run
    scheduler = std::make_unique<sg::optim::CosineAnnealingLR>(*optimizer, config.epochs * train_loader.size());

  MixedPrecision amp(config.amp);
  int start_epoch = 0;
  int64_t step = 0;
  if (!config.resume.empty()) {
    const auto metadata = sg::optim::load_checkpoint(config.resume, *model, optimizer.get());
    if (amp.scaler.is_enabled() && metadata.count("grad_scaler"))
      amp.scaler.load_state_dict(sg::amp::GradScalerState::from_json(metadata.at("grad_scaler")));
    start_epoch = std::stoi(metadata.at("epoch"));
    step = std::stoll(metadata.at("step"));
    if (scheduler) scheduler->load_state_dict({step, scheduler->base_lrs()});
    std::printf("resumed from %s after epoch %d (step %lld)\n", config.resume.c_str(), start_epoch,
                static_cast<long long>(step));
  }
  std::printf("%s: %lld parameters, %lld training / %lld test images, %d thread(s)\n", config.model.c_str(),
              static_cast<long long>(sg::models::count_parameters(*model)), static_cast<long long>(train_set->size()),
              static_cast<long long>(test_set->size()), config.threads);
  std::fflush(stdout);  // before the progress bar starts writing to stderr

  std::vector<std::string> log_columns{"step", "epoch", "loss", "lr", "accuracy"};
  if (amp.scaler.is_enabled()) log_columns.insert(log_columns.end(), {"scale", "skipped_steps"});
  sg::data::MetricsLog log(config.log, log_columns);
  for (int epoch = start_epoch; epoch < config.epochs; ++epoch) {
    train_loader.set_epoch(epoch);
    sg::data::ProgressBar bar(train_loader.size(), "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config.epochs), "img");
    for (const sg::data::Batch& batch : train_loader) {
      optimizer->zero_grad();
      sg::Tensor loss;
      {
        const sg::amp::AutocastGuard autocast = amp.region();
        loss = loss_of(config, (*model)(batch.input), batch.target);
      }
      amp.scaler.scale(loss).backward();
      amp.scaler.step(*optimizer);  // without --amp f16: optimizer->step()
      amp.scaler.update();
      if (scheduler) scheduler->step();
      ++step;
      const double loss_value = loss.item();
      std::map<std::string, std::string> row{{"step", std::to_string(step)}, {"epoch", std::to_string(epoch + 1)},
                                             {"loss", std::to_string(loss_value)},
                                             {"lr", std::to_string(optimizer->lr(0))}};
      if (amp.scaler.is_enabled()) {
        row["scale"] = std::to_string(amp.scaler.get_scale());
        row["skipped_steps"] = std::to_string(amp.scaler.skipped_steps());
        bar.update(1, batch.input.size(0), {{"loss", loss_value}, {"scale", amp.scaler.get_scale()},
                                            {"skipped", static_cast<double>(amp.scaler.skipped_steps())}});
      } else {
        bar.update(1, batch.input.size(0), {{"loss", loss_value}});
      }
      log.write(row);
    }
    bar.finish();
    const double train_seconds = bar.elapsed_seconds(), images_per_second = bar.items_per_second();
    Evaluation result;
    {
      const sg::amp::AutocastGuard autocast = amp.region();
      result = evaluate(config, *model, test_loader);
    }
    std::printf("epoch %d: test loss %.4f, test accuracy %.2f%% (training %.1f s, %.0f img/s)\n", epoch + 1,
                result.loss, result.accuracy, train_seconds, images_per_second);
    std::fflush(stdout);
    log.write({{"step", std::to_string(step)}, {"epoch", std::to_string(epoch + 1)},
               {"loss", std::to_string(result.loss)}, {"accuracy", std::to_string(result.accuracy)}});
    if (!config.save.empty()) {
      sg::optim::Metadata metadata{{"epoch", std::to_string(epoch + 1)}, {"step", std::to_string(step)},
                                   {"model", config.model}};
      if (amp.scaler.is_enabled()) metadata["grad_scaler"] = amp.scaler.state_dict().to_json();
      sg::optim::save_checkpoint(config.save, *model, optimizer.get(), metadata);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"Train a CNN on Fashion-MNIST (syncgrad)"};
  app.add_option("--data-dir", config.data_dir, "Directory with the Fashion-MNIST IDX files (.gz or raw)")
      ->capture_default_str();
  app.add_option("--model", config.model, "cnn (conv-BN-ReLU-pool x2, 2 linear) or basicnet (PyTorch MNIST example)")
      ->check(CLI::IsMember({"cnn", "basicnet"}))->capture_default_str();
  app.add_option("--epochs", config.epochs, "Passes over the training set")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch-size", config.batch_size, "Images per step")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", config.lr, "Learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--optimizer", config.optimizer, "adam, adamw, or sgd (momentum 0.9)")
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}))->capture_default_str();
  app.add_option("--scheduler", config.scheduler, "none, or cosine (annealed to 0 over all steps)")
      ->check(CLI::IsMember({"none", "cosine"}))->capture_default_str();
  app.add_option("--threads", config.threads, "Intra-op threads (OpenMP and OpenBLAS)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", config.seed, "Seed for initialisation, shuffling and dropout")->capture_default_str();
  app.add_option("--workers", config.workers, "Data-loader worker threads (0: load on the training thread)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--save", config.save, "Write a checkpoint (safetensors) here after every epoch");
  app.add_option("--resume", config.resume, "Continue from a checkpoint written by --save")->check(CLI::ExistingFile);
  app.add_option("--log", config.log, "CSV of step, epoch, loss, lr, accuracy");
  app.add_option("--train-subset", config.train_subset, "Train on the first N images only (0: all), for quick runs")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--amp", config.amp, "Mixed precision: none, f16 (autocast + loss scaler) or bf16 (autocast)")
      ->check(CLI::IsMember({"none", "f16", "bf16"}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(config);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "train_cnn: %s\n", error.what());
    return 1;
  }
}
