// GradScaler against torch.amp.GradScaler's rules: the scale sequence, skipped steps that change
// nothing, misuse errors, state round trips, the found-inf reducer hook, the fused unscale kernel,
// and an f16 training run that starts with an overflowing scale.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "core/kernels/amp.h"
#include "helpers.h"

using namespace sg;
namespace F = sg::nn::functional;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor parameter(const std::vector<double>& values) { return tensor(values).to(DType::f32).requires_grad_(); }

// One iteration with the gradient `grad` (scaled by the caller's choice) on p; returns whether it stepped.
bool iteration(amp::GradScaler& scaler, optim::Optimizer& optimizer, Tensor& p, double grad) {
  p.set_grad(full(p.sizes(), grad));
  const bool stepped = scaler.step(optimizer);
  scaler.update();
  return stepped;
}

}  // namespace

TEST_CASE("scale() multiplies the loss by 65536 in f32, and the defaults are torch's") {
  amp::GradScaler scaler;
  CHECK(scaler.get_scale() == 65536.0);
  const amp::GradScalerState state = scaler.state_dict();
  CHECK(state.growth_factor == 2.0);
  CHECK(state.backoff_factor == 0.5);
  CHECK(state.growth_interval == 2000);
  CHECK(state.growth_tracker == 0);
  const Tensor loss = tensor(std::vector<double>{0.75}).to(DType::f32);
  test::check_close(scaler.scale(loss), {0.75 * 65536}, 0.0);
  // An f16 loss of 2 times 65536 would overflow f16; the product is f32 instead.
  const Tensor scaled = scaler.scale(tensor(std::vector<double>{2.0}).to(DType::f16));
  CHECK(scaled.dtype() == DType::f32);
  test::check_close(scaled, {131072}, 0.0);
}

TEST_CASE("step unscales the gradients before the optimizer uses them") {
  Tensor p = parameter({1.0, -2.0, 0.5});
  optim::SGD sgd({p}, {.lr = 0.5});
  amp::GradScaler scaler({.init_scale = 1024});
  (scaler.scale(p * p).sum()).backward();  // d/dp sum(S p^2) = 2 S p
  CHECK(scaler.step(sgd));
  scaler.update();
  test::check_close(p, {1.0 - 0.5 * 2.0, -2.0 + 0.5 * 4.0, 0.5 - 0.5 * 1.0}, 0.0);
  test::check_close(p.grad(), {2.0, -4.0, 1.0}, 0.0);  // the unscaled gradient
}

TEST_CASE("the scale backs off on overflow and grows after growth_interval clean steps in a row") {
  Tensor p = parameter({0.5});
  optim::SGD sgd({p}, {.lr = 1e-3});
  amp::GradScaler scaler({.init_scale = 1024, .growth_interval = 3});
  struct Expected {
    double grad;
    bool stepped;
    double scale;
    int64_t tracker, skipped;
  };
  const std::vector<Expected> script{
      {1.0, true, 1024, 1, 0}, {1.0, true, 1024, 2, 0}, {kInf, false, 512, 0, 1},   // back off, tracker restarts
      {1.0, true, 512, 1, 1},  {1.0, true, 512, 2, 1},  {1.0, true, 1024, 0, 1},    // 3 clean steps: grow
      {1.0, true, 1024, 1, 1}, {NAN, false, 512, 0, 2}, {-kInf, false, 256, 0, 3},  // NaN and -inf count too
      {1.0, true, 256, 1, 3},
  };
  for (size_t i = 0; i < script.size(); ++i) {
    INFO("iteration ", i);
    CHECK(iteration(scaler, sgd, p, script[i].grad) == script[i].stepped);
    CHECK(scaler.get_scale() == script[i].scale);
    CHECK(scaler.growth_tracker() == script[i].tracker);
    CHECK(scaler.skipped_steps() == script[i].skipped);
  }
}

TEST_CASE("growth stops where the scale would overflow f32") {
  Tensor p = parameter({0.5});
  optim::SGD sgd({p}, {.lr = 1e-3});
  const double largest_power = std::ldexp(1.0, 127);  // 2^128 overflows f32
  amp::GradScaler scaler({.init_scale = largest_power, .growth_interval = 1});
  CHECK(iteration(scaler, sgd, p, 1.0));
  CHECK(scaler.get_scale() == largest_power);
  CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("an inf gradient skips the step and leaves the parameters and Adam's state untouched") {
  Tensor a = parameter({0.5, -1.5, 2.0}), b = parameter({3.0, -0.25});
  optim::Adam adam({a, b}, {.lr = 0.1});
  amp::GradScaler scaler;
  a.set_grad(full({3}, 0.3 * 65536));
  b.set_grad(full({2}, -0.2 * 65536));
  REQUIRE(scaler.step(adam));  // a real step first, so there is state to protect
  scaler.update();

  const std::vector<double> a_before = test::values(a), b_before = test::values(b);
  const std::vector<double> m_before = test::values(adam.state(a)->exp_avg),
                            v_before = test::values(adam.state(a)->exp_avg_sq);
  const int64_t a_steps = adam.state(a)->step, b_steps = adam.state(b)->step;
  a.set_grad(tensor(std::vector<double>{0.1, kInf, 0.2}).to(DType::f32));  // one element overflowed
  b.set_grad(full({2}, 0.4 * 65536));                                      // b's own gradient is fine
  CHECK_FALSE(scaler.step(adam));
  scaler.update();
  CHECK(test::values(a) == a_before);
  CHECK(test::values(b) == b_before);
  CHECK(test::values(adam.state(a)->exp_avg) == m_before);
  CHECK(test::values(adam.state(a)->exp_avg_sq) == v_before);
  CHECK(adam.state(a)->step == a_steps);
  CHECK(adam.state(b)->step == b_steps);
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(scaler.skipped_steps() == 1);
}

TEST_CASE("unscale_ twice in one step, step twice, or update without a step is an error") {
  Tensor p = parameter({0.5});
  optim::SGD sgd({p}, {.lr = 1e-3});
  amp::GradScaler scaler;
  CHECK_THROWS_WITH_AS(scaler.update(), doctest::Contains("no inf checks were recorded"), Error);
  p.set_grad(full({1}, 8.0));
  scaler.unscale_(sgd);
  CHECK_THROWS_WITH_AS(scaler.unscale_(sgd), doctest::Contains("already called on this SGD optimizer"), Error);
  test::check_close(p.grad(), {8.0 / 65536}, 0.0);  // divided once, not twice
  CHECK(scaler.step(sgd));
  CHECK_THROWS_WITH_AS(scaler.step(sgd), doctest::Contains("already called"), Error);
  CHECK_THROWS_WITH_AS(scaler.unscale_(sgd), doctest::Contains("after step()"), Error);
  scaler.update();
  scaler.unscale_(sgd);  // a new iteration may unscale again
}

TEST_CASE("unscale_ refuses f16 gradients") {
  Tensor p = tensor(std::vector<double>{0.5, 1.0}).to(DType::f16).requires_grad_();
  optim::SGD sgd({p}, {.lr = 1e-3});
  p.set_grad(full({2}, 1.0, {DType::f16}));
  amp::GradScaler scaler;
  CHECK_THROWS_WITH_AS(scaler.unscale_(sgd), doctest::Contains("f16 gradient"), Error);
}

TEST_CASE("a disabled scaler passes the loss through and always steps") {
  Tensor p = parameter({0.5});
  optim::SGD sgd({p}, {.lr = 0.5});
  amp::GradScaler scaler({.enabled = false});
  const Tensor loss = tensor(std::vector<double>{1.5}).to(DType::f32);
  CHECK(scaler.scale(loss).is_same(loss));
  CHECK(scaler.get_scale() == 1.0);
  p.set_grad(full({1}, 1.0));
  CHECK(scaler.step(sgd));
  scaler.update();
  test::check_close(p, {0.0}, 0.0);
}

TEST_CASE("state_dict round trips through load_state_dict, JSON and a checkpoint's metadata") {
  Tensor p = parameter({0.5});
  optim::SGD sgd({p}, {.lr = 1e-3});
  amp::GradScaler scaler({.init_scale = 4096, .growth_interval = 5});
  for (double grad : {1.0, kInf, 1.0, 1.0}) iteration(scaler, sgd, p, grad);
  const amp::GradScalerState state = scaler.state_dict();
  CHECK(state.scale == 2048);
  CHECK(state.growth_tracker == 2);
  CHECK(state.skipped_steps == 1);

  amp::GradScaler restored;
  restored.load_state_dict(amp::GradScalerState::from_json(state.to_json()));
  CHECK(restored.get_scale() == 2048);
  CHECK(restored.growth_tracker() == 2);
  CHECK(restored.skipped_steps() == 1);
  CHECK(restored.state_dict().growth_interval == 5);
  // Both continue identically: 3 more clean steps reach the interval and grow.
  for (int i = 0; i < 3; ++i) {
    iteration(scaler, sgd, p, 1.0);
    iteration(restored, sgd, p, 1.0);
  }
  CHECK(scaler.get_scale() == 4096);
  CHECK(restored.get_scale() == 4096);

  const std::string path =
      (std::filesystem::temp_directory_path() / ("sg_test_grad_scaler_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  nn::Linear model(2, 1);
  optim::save_checkpoint(path, model, &sgd, {{"grad_scaler", scaler.state_dict().to_json()}});
  amp::GradScaler from_file;
  from_file.load_state_dict(amp::GradScalerState::from_json(optim::load_checkpoint(path, model).at("grad_scaler")));
  std::filesystem::remove(path);
  CHECK(from_file.get_scale() == 4096);
  CHECK(from_file.state_dict().growth_interval == 5);
}

TEST_CASE("load_state_dict and from_json refuse what a scaler cannot hold") {
  amp::GradScaler scaler;
  amp::GradScalerState state;
  state.scale = -1;
  CHECK_THROWS_WITH_AS(scaler.load_state_dict(state), doctest::Contains("scale must be positive"), Error);
  state = {};
  state.growth_tracker = 2000;
  CHECK_THROWS_WITH_AS(scaler.load_state_dict(state),
                       doctest::Contains("growth_tracker must be in [0, growth_interval"), Error);
  CHECK_THROWS_WITH_AS(amp::GradScalerState::from_json(R"({"scale": 2.0})"),
                       doctest::Contains("not a saved GradScaler"), Error);
  CHECK(scaler.get_scale() == 65536.0);  // unchanged by the refused loads
  CHECK_THROWS_WITH_AS(amp::GradScaler({.backoff_factor = 1.5}), doctest::Contains("backoff_factor must be in (0, 1)"),
                       Error);
}

TEST_CASE("the found-inf agreement makes this rank skip a step another rank overflowed") {
  // A simulated second rank whose gradients overflowed: the agreement ORs its flag in (an
  // all-reduce with MAX over two ranks), as dist::Accelerator's does over the process group.
  float other_rank_found_inf = 1.0f;
  int calls = 0;
  const amp::FoundInfAgreement agreement = [&](Tensor& found_inf, const TensorList& gradients) {
    ++calls;
    CHECK(gradients.size() == 1);  // p's, the one gradient checked
    float& flag = *found_inf.data_ptr<float>();
    flag = std::max(flag, other_rank_found_inf);
  };
  Tensor p = parameter({0.5, 1.5});
  optim::Adam adam({p}, {.lr = 0.1});
  amp::GradScaler scaler({.agree_across_ranks = agreement});
  CHECK_FALSE(iteration(scaler, adam, p, 0.25 * 65536));  // this rank's gradients are finite
  CHECK(calls == 1);
  test::check_close(p, {0.5, 1.5}, 0.0);
  CHECK(adam.state(p) == nullptr);  // Adam never ran
  CHECK(scaler.get_scale() == 32768.0);

  other_rank_found_inf = 0.0f;
  CHECK(iteration(scaler, adam, p, 0.25 * 32768));
  CHECK(calls == 2);
  CHECK(adam.state(p)->step == 1);
}

TEST_CASE("the fused unscale kernel multiplies by 1/scale in the compute type and flags inf and NaN") {
  for (const DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    INFO(dtype);
    const Tensor base = (randn({8, 5}, {}, &test::rng()) * 100.0).to(dtype);
    const Tensor grad = base.t();  // strided: the kernel walks any layout
    const std::vector<double> before = test::values(grad);
    const double inv_scale = 1.0 / 3.0;  // not a power of two: the rounding shows
    Tensor found_inf = zeros({1});
    kernels::non_finite_check_and_unscale_(grad, found_inf, inv_scale);
    CHECK(found_inf.item() == 0.0);
    const std::vector<double> after = test::values(grad);
    for (size_t i = 0; i < before.size(); ++i) {
      const double expected =
          dtype == DType::f64
              ? before[i] * inv_scale
              : scalar_tensor(static_cast<float>(before[i]) * static_cast<float>(inv_scale)).to(dtype).item();
      CHECK(after[i] == expected);
    }
    // One non-finite element sets the flag; a later clean tensor does not reset it.
    Tensor with_nan = ones({3, 4}, {dtype});
    with_nan.narrow(0, 1, 1).narrow(1, 2, 1).fill_(NAN);
    kernels::non_finite_check_and_unscale_(with_nan, found_inf, inv_scale);
    CHECK(found_inf.item() == 1.0);
    kernels::non_finite_check_and_unscale_(ones({3}, {dtype}), found_inf, inv_scale);
    CHECK(found_inf.item() == 1.0);
  }
  CHECK_THROWS_WITH_AS(kernels::non_finite_check_and_unscale_(ones({2}), zeros({1}, {DType::f64}), 0.5),
                       doctest::Contains("one-element f32 tensor"), Error);
}

TEST_CASE("f16 training with a 65536 loss scale overflows at first, backs off, then learns") {
  // A small regression whose targets are large: scaled by 65536, the gradients of its f16
  // products exceed f16's 65504 at first, so the first steps are skipped while the scale halves.
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16, true, &test::rng()), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 1, true, &test::rng())});
  const Tensor x = randn({64, 8}, {}, &test::rng());
  const Tensor y = (x.sum({1}, true) * 3.0 + 5.0);
  optim::Adam adam(model->parameters(), {.lr = 0.02});
  amp::GradScaler scaler;
  std::vector<double> losses;  // of the steps that were taken
  std::vector<bool> stepped;
  for (int step = 0; step < 80; ++step) {
    adam.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(DType::f16);
      loss = F::mse_loss((*model)(x), y);
    }
    REQUIRE(loss.dtype() == DType::f32);
    scaler.scale(loss).backward();
    stepped.push_back(scaler.step(adam));
    scaler.update();
    if (stepped.back()) losses.push_back(loss.item());
    for (const Tensor& p : model->parameters()) REQUIRE(p.grad().dtype() == DType::f32);
  }
  CHECK_FALSE(stepped[0]);  // 65536 was too large
  CHECK(scaler.skipped_steps() >= 1);
  CHECK(scaler.get_scale() < 65536.0);  // it backed off ...
  CHECK(stepped.back());                // ... until the steps went through
  REQUIRE(losses.size() >= 40);
  for (double loss : losses) CHECK(std::isfinite(loss));
  CHECK(losses.back() < 0.2 * losses.front());  // and training made progress
}
