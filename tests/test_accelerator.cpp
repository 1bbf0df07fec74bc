// dist::Accelerator on a single process (the multi-process side runs in tests/test_ddp.cpp):
// prepare leaves the model alone, the loader covers the data set, state round-trips, and the
// mixed-precision pieces (autocast, scaler, unscale before clipping) are wired.
#include <cstdlib>
#include <filesystem>

#include "helpers.h"

using namespace sg;

namespace {

std::shared_ptr<nn::Sequential> small_model() {
  Generator generator(11);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(4, 2, true, &generator)});
}

void train_step(dist::Accelerator& accelerator, nn::Module& model, optim::Optimizer& optimizer) {
  optimizer.zero_grad();
  Tensor loss;
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    loss = model(randn({5, 3}, {}, &test::rng())).pow(2.0).mean();
  }
  accelerator.backward(loss);
  accelerator.step(optimizer);
}

}  // namespace

TEST_CASE("on one process the accelerator leaves the model as it is and the loader covers every example once") {
  REQUIRE(std::getenv("WORLD_SIZE") == nullptr);
  dist::Accelerator accelerator;
  CHECK(accelerator.num_processes() == 1);
  CHECK(accelerator.is_main_process());
  auto model = small_model();
  CHECK(accelerator.prepare(model).get() == model.get());
  CHECK(&accelerator.unwrap_model(*model) == model.get());

  auto dataset = std::make_shared<data::TensorDataset>(arange(0, 11, 1, {DType::f32}), arange(0, 11, 1, {DType::i64}));
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 4, .shuffle = true, .seed = 3});
  TensorList seen;
  for (const data::Batch& batch : loader) seen.push_back(batch.target);
  const Tensor all = accelerator.gather_for_metrics(cat(seen), dataset->size());
  CHECK(all.numel() == 11);
  CHECK(test::values(all.sum()) == std::vector<double>{55});  // 0 + 1 + ... + 10: each exactly once
}

TEST_CASE("device cpu puts model and batches on the CPU, and without a GPU auto does too and cuda is an error") {
  dist::AcceleratorOptions options;
  options.device = "cpu";
  {
    dist::Accelerator accelerator(options);
    CHECK(accelerator.device() == Device::cpu());
    auto model = accelerator.prepare(small_model());
    for (const Tensor& param : model->parameters()) CHECK(param.device() == Device::cpu());
    auto dataset = std::make_shared<data::TensorDataset>(randn({6, 3}, {}, &test::rng()), arange(0, 6, 1));
    for (const data::Batch& batch : accelerator.prepare(dataset, {.batch_size = 4})) {
      CHECK(batch.input.device() == Device::cpu());
      CHECK(batch.target.device() == Device::cpu());
    }
  }
  options.device = "tpu";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains("\"auto\", \"cpu\" or \"cuda\""), Error);
  if (cuda::is_available()) return;  // a GPU machine: tests/cuda/test_cuda_training.cpp
  options.device = "auto";
  CHECK(dist::Accelerator(options).device() == Device::cpu());
  CHECK(dist::Accelerator().device() == Device::cpu());  // "auto" is the default
  options.device = "cuda";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains(cuda::unavailable_reason().c_str()), Error);
}

TEST_CASE("a prepared loader with pin_memory yields the same batches as one without, with and without workers") {
  // Page-locked copies on a machine with a GPU, the option ignored on one without: the same
  // examples in the same order either way.
  dist::AcceleratorOptions options;
  options.device = "cpu";
  dist::Accelerator accelerator(options);
  auto dataset = std::make_shared<data::TensorDataset>(randn({13, 2, 3}, {}, &test::rng()), arange(0, 13, 1));
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    data::DataLoader plain = accelerator.prepare(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers});
    data::DataLoader pinned =
        accelerator.prepare(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers, .pin_memory = true});
    auto plain_batch = plain.begin();
    int64_t batches = 0;
    for (const data::Batch& batch : pinned) {
      REQUIRE(plain_batch != plain.end());
      CHECK(batch.input.device() == Device::cpu());
      CHECK(test::max_abs_diff(batch.input, plain_batch->input) == 0);
      CHECK(test::values(batch.target) == test::values(plain_batch->target));
      ++plain_batch;
      ++batches;
    }
    CHECK(batches == 4);  // 13 examples: 4 + 4 + 4 + 1
  }
}

TEST_CASE("save_state and load_state round-trip model, optimizer, scheduler, RNG and metadata") {
  const std::string path = "test_accelerator_state.safetensors";
  dist::Accelerator accelerator;
  auto model = accelerator.prepare(small_model());
  optim::Adam optimizer(model->parameters(), {.lr = 0.01});
  optim::StepLR scheduler(optimizer, 2, 0.5);
  accelerator.prepare(optimizer);
  accelerator.prepare(scheduler);
  for (int step = 0; step < 3; ++step) {
    train_step(accelerator, *model, optimizer);
    scheduler.step();
  }
  manual_seed(1234);
  randn({7});  // move the default generator off its seed
  accelerator.save_state(path, *model, {{"epoch", "3"}});
  const nn::StateDict saved = model->state_dict();
  const uint64_t offset = default_generator().offset();
  const double lr = optimizer.lr(0);

  // Train on, then restore: everything returns to the saved point.
  for (int step = 0; step < 2; ++step) {
    train_step(accelerator, *model, optimizer);
    scheduler.step();
  }
  randn({5});
  const optim::Metadata metadata = accelerator.load_state(path, *model);
  CHECK(metadata.at("epoch") == "3");
  CHECK(metadata.count("rng") == 0);  // the accelerator's own entries are consumed
  for (const auto& [name, value] : model->state_dict()) CHECK(test::max_abs_diff(value, saved.at(name)) == 0);
  CHECK(optimizer.lr(0) == lr);
  CHECK(scheduler.last_epoch() == 3);
  CHECK(default_generator().seed() == 1234);
  CHECK(default_generator().offset() == offset);
  CHECK_THROWS_WITH_AS(accelerator.save_state(path, *model, {{"rng", "mine"}}), doctest::Contains("reserved"), Error);
  std::filesystem::remove(path);
}

TEST_CASE("load_state names the file and the key of a scheduler or RNG entry it cannot restore") {
  const std::string path = "test_accelerator_bad_state.safetensors";
  dist::Accelerator accelerator;
  auto model = accelerator.prepare(small_model());
  optim::Adam optimizer(model->parameters(), {.lr = 0.01});
  optim::StepLR scheduler(optimizer, 2, 0.5);
  accelerator.prepare(optimizer);
  accelerator.prepare(scheduler);
  accelerator.save_state(path, *model, {{"epoch", "1"}});
  const SafetensorsFile saved = load_safetensors(path);
  const auto load_with = [&](const std::string& key, const std::string& value) {
    optim::Metadata metadata = saved.metadata;
    metadata[key] = value;
    save_safetensors(path, saved.tensors, metadata);
    accelerator.load_state(path, *model);
  };
  const std::string where = "Accelerator::load_state: " + path + ": metadata ";
  const std::string negative_lr = where + "'scheduler': LRScheduler.load_state_dict: base_lrs[0] = -1";
  CHECK_THROWS_WITH_AS(load_with("scheduler", R"({"last_epoch": 3, "base_lrs": [-1.0]})"),
                       doctest::Contains(negative_lr.c_str()), Error);
  CHECK_THROWS_WITH_AS(load_with("scheduler", R"({"last_epoch": 3})"),
                       doctest::Contains((where + "'scheduler': ").c_str()), Error);
  CHECK_THROWS_WITH_AS(load_with("rng", "{not json"), doctest::Contains((where + "'rng': ").c_str()), Error);
  std::filesystem::remove(path);
}

TEST_CASE("f16 mixed precision: autocast region, scaled backward, unscale before clipping") {
  dist::AcceleratorOptions options;
  options.mixed_precision = "fp8";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains("\"no\", \"f16\" or \"bf16\""), Error);
  options.mixed_precision = "f16";
  dist::Accelerator accelerator(options);
  CHECK(accelerator.scaler().is_enabled());
  CHECK(accelerator.scaler().get_scale() == 65536.0);
  auto model = accelerator.prepare(small_model());
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    CHECK((*model)(randn({2, 3})).dtype() == DType::f16);
  }
  const Tensor x = randn({5, 3}, {}, &test::rng());
  optimizer.zero_grad();
  CHECK_THROWS_WITH_AS(accelerator.clip_grad_norm_(model->parameters(), 1.0), doctest::Contains("prepare(optimizer)"),
                       Error);
  accelerator.prepare(optimizer);
  Tensor loss;
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    loss = (*model)(x).pow(2.0).mean();
  }
  accelerator.backward(loss);
  const Tensor scaled = model->parameters()[0].grad().clone();
  // The true norm: clipping must see the unscaled gradients (the scaled ones are 65536 times larger).
  const double norm = accelerator.clip_grad_norm_(model->parameters(), 1e9);
  CHECK(test::max_abs_diff(model->parameters()[0].grad() * 65536.0, scaled) < 1e-6 * (1 + scaled.abs().max().item()));
  CHECK(norm < 1e3);
  CHECK(accelerator.step(optimizer));
}
