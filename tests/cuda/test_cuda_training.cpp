// Whole training steps on the GPU. The op-by-op tests compare each kernel with the CPU; these
// compare what a user sees: the same model from the same initial state, trained on the same
// batch for a few SGD-with-momentum steps, ends with the same parameters on either device. Then
// the Accelerator's device placement (model, batches, metrics on cuda:0) and f16 mixed precision
// (autocast + GradScaler, including a skipped step) running on the GPU.
#include <functional>
#include <limits>

#include "cuda_compare.h"
#include "helpers.h"
#include "models/cnn.h"

using namespace sg;
using test::gpu;

namespace {

// Odd widths, so no vector width or tile divides them.
std::shared_ptr<nn::Module> small_mlp() {
  Generator generator(5);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(13, 31, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(31, 7, true, &generator)});
}

void train_three_steps(nn::Module& model, const Tensor& input, const Tensor& target) {
  optim::SGD optimizer(model.parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    nn::functional::cross_entropy(model(input), target).backward();
    optimizer.step();
  }
}

// Two copies of `make()`'s model with the same initial state, one moved to the GPU, train on the
// same batch; every parameter and buffer (BatchNorm's running statistics too) must agree to
// 1e-4 relative: each op matches the CPU to about 1e-5 (f32, sums in another order), and three
// steps through a whole network compound that by a few times.
void check_training_matches_cpu(const std::function<std::shared_ptr<nn::Module>()>& make, const Tensor& input,
                                const Tensor& target) {
  auto on_cpu = make();
  auto on_gpu = make();
  on_gpu->load_state_dict(on_cpu->state_dict());
  on_gpu->to(gpu());
  for (const Tensor& param : on_gpu->parameters()) REQUIRE(param.device() == gpu());
  train_three_steps(*on_cpu, input, target);
  train_three_steps(*on_gpu, input.to(gpu()), target.to(gpu()));
  const nn::StateDict want = on_cpu->state_dict(), got = on_gpu->state_dict();
  for (const auto& [name, value] : want) {
    INFO("state entry ", name);
    test::check_matches_cpu(got.at(name), value, 1e-4);
  }
}

dist::AcceleratorOptions on_cuda(const std::string& mixed_precision = "no") {
  dist::AcceleratorOptions options;
  options.device = "cuda";
  options.mixed_precision = mixed_precision;
  return options;
}

}  // namespace

TEST_CASE("three SGD-momentum steps of an MLP on the GPU give the CPU's parameters") {
  const Tensor input = randn({17, 13}, {}, &test::rng());
  const Tensor target = randint(0, 7, {17}, {DType::i64}, &test::rng());
  check_training_matches_cpu(small_mlp, input, target);
}

TEST_CASE("three SGD-momentum steps of the Fashion-MNIST CNN on the GPU give the CPU's parameters and statistics") {
  const Tensor images = randn({6, 1, 28, 28}, {}, &test::rng());
  const Tensor labels = randint(0, 10, {6}, {DType::i64}, &test::rng());
  check_training_matches_cpu([] { return models::CNN(); }, images, labels);
}

TEST_CASE("an Accelerator on device cuda puts the model, every batch and the gathered metrics on cuda:0") {
  CHECK(dist::Accelerator().device() == gpu());  // "auto" on a machine with a GPU, LOCAL_RANK 0
  dist::Accelerator accelerator(on_cuda());
  REQUIRE(accelerator.device() == gpu());
  auto model = accelerator.prepare(small_mlp());
  for (const Tensor& param : model->parameters()) CHECK(param.device() == gpu());

  const Tensor inputs = randn({10, 13}, {}, &test::rng());
  const Tensor labels = randint(0, 7, {10}, {DType::i64}, &test::rng());
  auto dataset = std::make_shared<data::TensorDataset>(inputs, labels);
  for (int workers : {0, 2}) {
    for (bool pin_memory : {false, true}) {
      CAPTURE(workers);
      CAPTURE(pin_memory);
      data::DataLoader loader =
          accelerator.prepare(dataset, {.batch_size = 4, .num_workers = workers, .pin_memory = pin_memory});
      int64_t first = 0;
      TensorList targets;
      for (const data::Batch& batch : loader) {
        const int64_t rows = batch.input.size(0);
        CHECK(batch.input.device() == gpu());
        CHECK(batch.target.device() == gpu());
        test::check_matches_cpu(batch.input, dataset->inputs().narrow(0, first, rows), 0);  // a copy: exact
        test::check_matches_cpu(batch.target, dataset->targets().narrow(0, first, rows), 0);
        CHECK((*model)(batch.input).device() == gpu());
        targets.push_back(accelerator.gather_for_metrics(batch.target));
        CHECK(targets.back().device() == gpu());
        first += rows;
      }
      CHECK(first == 10);
      const Tensor gathered = cat(targets);
      test::check_matches_cpu(gathered, dataset->targets(), 0);
    }
  }
}

TEST_CASE("f16 autocast and the GradScaler train on the GPU: f16 forward, f32 parameters, a skipped step on overflow") {
  dist::Accelerator accelerator(on_cuda("f16"));
  auto model = accelerator.prepare(small_mlp());
  optim::SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  accelerator.prepare(optimizer);
  const Tensor input = randn({17, 13}, {}, &test::rng()).to(gpu());
  const Tensor target = randint(0, 7, {17}, {DType::i64}, &test::rng()).to(gpu());
  const Tensor initial = model->parameters()[0].detach().to(Device::cpu());

  // One step on `x`; returns whether the optimizer stepped.
  const auto step_on = [&](const Tensor& x) {
    optimizer.zero_grad();
    Tensor loss;
    {
      const amp::AutocastGuard autocast = accelerator.autocast();
      const Tensor output = (*model)(x);
      CHECK(output.dtype() == DType::f16);
      CHECK(output.device() == gpu());
      loss = nn::functional::cross_entropy(output, target);  // losses run in f32 under autocast
    }
    CHECK(loss.dtype() == DType::f32);
    accelerator.backward(loss);
    return accelerator.step(optimizer);
  };
  for (int step = 0; step < 3; ++step) CHECK(step_on(input));
  CHECK(accelerator.scaler().get_scale() == 65536.0);  // no overflow, and growth waits 2000 steps
  for (const Tensor& param : model->parameters()) {
    CHECK(param.device() == gpu());
    CHECK(param.dtype() == DType::f32);
    CHECK(param.grad().device() == gpu());
  }
  const Tensor trained = model->parameters()[0].detach().to(Device::cpu());
  CHECK(test::max_abs_diff(trained, initial) > 0);

  // 1e6 is beyond f16's largest value (65504): the inputs become inf in the autocast region, the
  // gradients inf/NaN, and the step is skipped with the scale halved.
  CHECK_FALSE(step_on(input * 1e6));
  CHECK(accelerator.scaler().get_scale() == 32768.0);
  CHECK(test::max_abs_diff(model->parameters()[0].detach().to(Device::cpu()), trained) == 0);
}
