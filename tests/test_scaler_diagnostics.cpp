// GradScaler's diagnostics (amp/scaler_diagnostics.h): a real f16 overflow and a planted inf are
// named by parameter and module, a clean run reports nothing, the underflow fraction matches a
// count by hand, the scale history and the summary's rule, and a scaler without the option keeps
// nothing. The two-rank part (which rank an overflow began on) is in tests/test_ddp.cpp.
#include <cmath>
#include <limits>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "amp/scaler_diagnostics.h"
#include "helpers.h"
#include "train/accelerator.h"

using namespace sg;
namespace F = sg::nn::functional;

namespace {

// Two linear heads on one input, summed: `small` sees x, `large` sees 1000 x. Under f16 autocast
// the weight gradient of `large` is 1000 times that of `small`: at the initial scale 65536 it
// exceeds f16's 65504 (about 4e6: see first_steps) while every other gradient stays below it.
struct TwoHeads : nn::Module {
  explicit TwoHeads(double factor) : large_input_factor(factor) {
    small = register_module("small", std::make_shared<nn::Linear>(4, 1));
    large = register_module("large", std::make_shared<nn::Linear>(4, 1));
    NoGradGuard no_grad;
    small->weight.fill_(1e-3);
    large->weight.fill_(1e-4);
    small->bias.fill_(0.0);
    large->bias.fill_(0.0);
  }
  Tensor forward(const Tensor& x) override { return (*small)(x) + (*large)(x * large_input_factor); }

  double large_input_factor;
  std::shared_ptr<nn::Linear> small, large;
};

// `steps` f16 iterations of mse_loss(model(x), 0) on 256 rows; returns which ones stepped. The
// caller's optimizer takes tiny steps, so the gradients stay what the estimate below says.
// Per row the error is about 0.1 * sum(x), so the scaled output gradient is about 512 * error
// and small.weight's gradient about 4400 at scale 65536: large.weight's, 1000 times that, is inf.
std::vector<bool> first_steps(nn::Module& model, amp::GradScaler& scaler, optim::Optimizer& optimizer, int steps) {
  const Tensor x = test::rand_input({256, 4}).detach().to(DType::f32);
  const Tensor y = zeros({256, 1});
  std::vector<bool> stepped;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(DType::f16);
      loss = F::mse_loss(model(x), y);
    }
    scaler.scale(loss).backward();
    stepped.push_back(scaler.step(optimizer));
    scaler.update();
  }
  return stepped;
}

// The note's definition, element by element: 0 < |e| < 2^-14.
double underflow_fraction_by_hand(const Tensor& scaled_grad) {
  const std::vector<double> values = test::values(scaled_grad);
  int64_t count = 0;
  for (double value : values) count += value != 0.0 && std::abs(value) < std::ldexp(1.0, -14);
  return static_cast<double>(count) / static_cast<double>(values.size());
}

// Gradients whose magnitudes spread over ten decades (1 down to about 1e-10), every seventh exactly 0.
Tensor gradient_over_many_decades(const Shape& shape) {
  Tensor grad = (randn(shape, {}, &test::rng()) * exp(rand(shape, {}, &test::rng()) * -23.0)).contiguous();
  float* data = grad.data_ptr<float>();
  for (int64_t i = 0; i < grad.numel(); i += 7) data[i] = 0.0f;
  return grad;
}

}  // namespace

TEST_CASE("an f16 overflow in one layer's gradient is named by its parameter and module") {
  const auto model = std::make_shared<TwoHeads>(1000.0);
  optim::SGD sgd(model->parameters(), {.lr = 1e-6});
  amp::GradScaler scaler({.diagnostics = true});
  scaler.add_parameter_names(*model);
  const std::vector<bool> stepped = first_steps(*model, scaler, sgd, 12);
  const amp::ScalerDiagnostics& diagnostics = *scaler.diagnostics();
  REQUIRE(scaler.skipped_steps() >= 1);
  CHECK_FALSE(stepped.front());
  CHECK(stepped.back());  // the scale backed off until it fit
  REQUIRE(diagnostics.skipped_steps().size() == static_cast<size_t>(scaler.skipped_steps()));
  for (const amp::SkippedStep& skipped : diagnostics.skipped_steps()) {
    CAPTURE(skipped.str());
    REQUIRE(skipped.gradients.size() == 1);  // small.* and large.bias stayed finite
    CHECK(skipped.gradients[0].parameter == "large.weight");
    CHECK(std::string(skipped.gradients[0].kind) == "inf");
    CHECK(skipped.gradients[0].handle.is_same(model->large->weight));
  }
  CHECK(diagnostics.skipped_steps()[0].iteration == 0);
  CHECK(diagnostics.skipped_steps()[0].scale == 65536.0);
  CHECK(diagnostics.skipped_steps()[0].str() ==
        "iteration 0 (scale 65536): inf/NaN in the gradient of large.weight (inf)");
  // Every skip came while the scale backed off from its start: no layer is blamed for them.
  CHECK(diagnostics.parameters()[2].nonfinite_iterations.size() == diagnostics.skipped_steps().size());  // large.weight
  CHECK(diagnostics.safer_outside_f16().empty());
  CHECK(diagnostics.iterations() == 12);
}

TEST_CASE("a clean f16 run reports no skipped step and picks no layer") {
  const auto model = std::make_shared<TwoHeads>(1.0);  // both heads see x: every gradient fits f16 at 65536
  optim::SGD sgd(model->parameters(), {.lr = 1e-6});
  amp::GradScaler scaler({.diagnostics = true});
  scaler.add_parameter_names(*model);
  const std::vector<bool> stepped = first_steps(*model, scaler, sgd, 5);
  const amp::ScalerDiagnostics& diagnostics = *scaler.diagnostics();
  for (const bool step : stepped) CHECK(step);
  CHECK(diagnostics.skipped_steps().empty());
  CHECK(diagnostics.safer_outside_f16().empty());
  REQUIRE(diagnostics.scale_history().size() == 1);  // 65536 throughout
  CHECK(diagnostics.scale_history()[0] == std::pair<int64_t, double>{0, 65536.0});
  // Every parameter was measured each iteration, under its name.
  REQUIRE(diagnostics.parameters().size() == 4);
  for (const amp::ParameterHealth& health : diagnostics.parameters()) CHECK(health.measured_iterations == 5);
  const std::map<std::string, double> scalars = diagnostics.underflow_scalars();
  CHECK(scalars.size() == 4);
  CHECK(scalars.count("amp/underflow/large.weight") == 1);
  CHECK(diagnostics.summary().find("safer in f32 or bf16") != std::string::npos);
  CHECK(diagnostics.summary().find("): none") != std::string::npos);
}

TEST_CASE("the f16 underflow fraction counts the nonzero elements below 2^-14 of the scaled gradient") {
  const Tensor grad = gradient_over_many_decades({37, 53});
  const double by_hand = underflow_fraction_by_hand(grad);
  REQUIRE(by_hand > 0.05);  // the input really spans the threshold
  REQUIRE(by_hand < 0.95);
  CHECK(amp::f16_underflow_fraction(grad) == by_hand);
  CHECK(amp::f16_underflow_fraction(empty({0})) == 0.0);

  // Through the scaler: measured on the gradient as backward left it, before the unscale.
  Tensor p = randn({37, 53}, {}, &test::rng()).requires_grad_();
  optim::SGD sgd({p}, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 1024, .diagnostics = true});
  p.set_grad(grad.clone());
  CHECK(scaler.step(sgd));
  scaler.update();
  const amp::ParameterHealth& health = scaler.diagnostics()->parameters().at(0);
  CHECK(health.last_underflow_fraction == by_hand);
  CHECK(health.name == "parameter 0 of SGD [37, 53]");  // no names were given
  test::check_close(p.grad(), test::values(grad / 1024.0), 0.0);
}

TEST_CASE("overflows that recur after the settling iterations and a high underflow fraction pick a layer") {
  Tensor a = randn({3}, {}, &test::rng()).requires_grad_();
  Tensor b = randn({2}, {}, &test::rng()).requires_grad_();
  optim::SGD sgd({a, b}, {.lr = 0.1});
  amp::GradScaler scaler({.diagnostics = true});
  // Iterations 0, 2, 4 clean; 1, 3 and 5 get an inf planted in a's gradient (as a gradient hook
  // could). b's gradients are tiny: 1e-10 times the scale is below 2^-14 at every scale here.
  for (int iteration = 0; iteration < 6; ++iteration) {
    Tensor grad_a = test::rand_input({3}).detach().to(DType::f32) * scaler.get_scale();
    if (iteration % 2 == 1) grad_a.narrow(0, 1, 1).fill_(std::numeric_limits<double>::infinity());
    a.set_grad(grad_a);
    b.set_grad(full({2}, 1e-10 * scaler.get_scale()));
    CHECK(scaler.step(sgd) == (iteration % 2 == 0));
    scaler.update();
  }
  const amp::ScalerDiagnostics& diagnostics = *scaler.diagnostics();
  const std::vector<std::pair<int64_t, double>> history{{0, 65536.0}, {2, 32768.0}, {4, 16384.0}};
  CHECK(diagnostics.scale_history() == history);
  REQUIRE(diagnostics.skipped_steps().size() == 3);
  CHECK(diagnostics.skipped_steps()[1].str() ==
        "iteration 3 (scale 32768): inf/NaN in the gradient of parameter 0 of SGD [3] (inf)");
  REQUIRE(diagnostics.parameters().size() == 2);
  const amp::ParameterHealth& health_a = diagnostics.parameters()[0];
  CHECK(health_a.nonfinite_iterations == std::vector<int64_t>{1, 3, 5});
  CHECK(health_a.nonfinite_steps_from(2) == 2);
  CHECK(diagnostics.parameters()[1].mean_underflow_fraction() == 1.0);
  // The default rule leaves the first 100 iterations out: only b's underflow counts.
  CHECK(diagnostics.safer_outside_f16() == std::vector<std::string>{"parameter 1 of SGD [2]"});
  const amp::SaferPrecisionRule settled_at_2{.settling_iterations = 2};
  CHECK(diagnostics.safer_outside_f16(settled_at_2) ==
        std::vector<std::string>{"parameter 0 of SGD [3]", "parameter 1 of SGD [2]"});
  CHECK(diagnostics
            .safer_outside_f16({.settling_iterations = 2, .min_nonfinite_steps = 3, .min_mean_underflow_fraction = 1.5})
            .empty());
  const std::string summary = diagnostics.summary(settled_at_2);
  CAPTURE(summary);
  CHECK(summary.find("6 iterations, 3 skipped") != std::string::npos);
  CHECK(summary.find("65536 (from iteration 0) 32768 (from iteration 2) 16384 (from iteration 4)") !=
        std::string::npos);
  CHECK(summary.find("parameter 0 of SGD [3]: inf/NaN in 2 skipped steps from iteration 2 on") != std::string::npos);
  CHECK(summary.find("mean underflow fraction 100.0% over 6 iterations") != std::string::npos);
}

TEST_CASE("without the option the scaler measures and keeps nothing") {
  Tensor p = randn({4}, {}, &test::rng()).requires_grad_();
  optim::SGD sgd({p}, {.lr = 0.1});
  amp::GradScaler scaler;
  scaler.add_parameter_names(*std::make_shared<TwoHeads>(1.0));  // accepted, and ignored
  for (const double grad : {std::numeric_limits<double>::infinity(), 1.0}) {
    p.set_grad(full({4}, grad));
    scaler.step(sgd);
    scaler.update();
  }
  CHECK(scaler.skipped_steps() == 1);
  CHECK(scaler.diagnostics() == nullptr);
  // A disabled scaler has no diagnostics either, even when asked for.
  CHECK(amp::GradScaler({.enabled = false, .diagnostics = true}).diagnostics() == nullptr);
}

TEST_CASE("the Accelerator's amp_diagnostics names the prepared model's parameters and needs f16") {
  // Options set field by field: designated initialisers of AcceleratorOptions make GCC 12 warn
  // (wrongly) that DDPOptions' strings may be used uninitialised.
  dist::AcceleratorOptions options;
  options.mixed_precision = "f16";
  options.amp_diagnostics = true;
  dist::Accelerator accelerator(options);
  std::shared_ptr<nn::Module> model = accelerator.prepare(std::make_shared<TwoHeads>(1000.0));
  optim::SGD sgd(model->parameters(), {.lr = 0.01});
  accelerator.prepare(sgd);
  const Tensor x = test::rand_input({256, 4}).detach().to(DType::f32);
  sgd.zero_grad();
  Tensor loss;
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    loss = F::mse_loss((*model)(x), zeros({256, 1}));
  }
  accelerator.backward(loss);
  CHECK_FALSE(accelerator.step(sgd));
  const amp::ScalerDiagnostics* diagnostics = accelerator.scaler().diagnostics();
  REQUIRE(diagnostics != nullptr);
  REQUIRE(diagnostics->skipped_steps().size() == 1);
  REQUIRE(diagnostics->skipped_steps()[0].gradients.size() == 1);
  CHECK(diagnostics->skipped_steps()[0].gradients[0].parameter == "large.weight");

  options.mixed_precision = "bf16";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains("amp_diagnostics reports on the f16 loss scaler"),
                       Error);
}
