// Optimizers, learning-rate schedulers and gradient clipping against PyTorch's formulas.
//
// Note [Where the PyTorch constants come from]
// The constants marked "torch 1.13" were printed by Debian's python3-torch 1.13.1
// (/usr/bin/python3) running, in float64, 5 steps of the same quadratic as `Quadratic` below:
//   p = torch.tensor([0.5, -1.5, 2.0], requires_grad=True); opt = torch.optim.<X>([p], ...)
//   for _ in range(5): opt.zero_grad(); (c * (p - target) ** 2).sum().backward(); opt.step()
//   print(["%.17g" % v for v in p.tolist()])
// and the scheduler / clip_grad_norm_ calls named next to each constant. The reference
// implementations in this file are the documented algorithms written out element by element;
// the constants check those references, the references check every step of ours.
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "core/kernels/optim.h"
#include "helpers.h"

using namespace sg;
using Trajectory = std::vector<std::vector<double>>;  // parameter values after each step

namespace {
const std::vector<double> kStart{0.5, -1.5, 2.0};

// loss = sum(c * (p - target)^2), so d loss / d p = 2 c (p - target).
struct Quadratic {
  std::vector<double> target{1.0, 0.25, -0.5};
  std::vector<double> c{1.0, 3.0, 0.5};

  double grad(const std::vector<double>& p, size_t i) const { return 2.0 * c[i] * (p[i] - target[i]); }
  void backward(const Tensor& p) const {
    (tensor(c).to(p.dtype()) * (p - tensor(target).to(p.dtype())).pow(2.0)).sum().backward();
  }
};

// Runs `steps` steps of an optimizer made by make({p}) on the quadratic.
template <typename Make>
Trajectory run(Make make, int steps = 5, DType dtype = DType::f64) {
  Tensor p = tensor(kStart).to(dtype).requires_grad_();
  auto optimizer = make(TensorList{p});
  Trajectory out;
  for (int t = 0; t < steps; ++t) {
    optimizer.zero_grad();
    Quadratic().backward(p);
    optimizer.step();
    out.push_back(test::values(p));
  }
  return out;
}

// torch.optim.SGD's algorithm, one element at a time.
Trajectory reference_sgd(const optim::SGDOptions& o, int steps = 5) {
  std::vector<double> p = kStart, buffer(p.size());
  Trajectory out;
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> before = p;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = Quadratic().grad(before, i);
      if (o.maximize) g = -g;
      g += o.weight_decay * before[i];
      if (o.momentum != 0) {
        buffer[i] = t == 1 ? g : o.momentum * buffer[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buffer[i] : buffer[i];
      }
      p[i] = before[i] - o.lr * g;
    }
    out.push_back(p);
  }
  return out;
}

// torch.optim.Adam's algorithm (AdamW's with `decoupled`), one element at a time.
template <typename Options>
Trajectory reference_adam(const Options& o, bool decoupled, int steps = 5) {
  std::vector<double> p = kStart, m(p.size()), v(p.size()), v_max(p.size());
  Trajectory out;
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> before = p;
    for (size_t i = 0; i < p.size(); ++i) {
      double g = Quadratic().grad(before, i);
      if (o.maximize) g = -g;
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else g += o.weight_decay * before[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      v_max[i] = std::max(v_max[i], v[i]);
      const double second = o.amsgrad ? v_max[i] : v[i];
      const double step_size = o.lr / (1 - std::pow(o.beta1, t));
      p[i] -= step_size * m[i] / (std::sqrt(second) / std::sqrt(1 - std::pow(o.beta2, t)) + o.eps);
    }
    out.push_back(p);
  }
  return out;
}

// Every value of every step within `tolerance`.
void check_close(const Trajectory& actual, const Trajectory& expected, double tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (size_t t = 0; t < actual.size(); ++t) {
    REQUIRE(actual[t].size() == expected[t].size());
    for (size_t i = 0; i < actual[t].size(); ++i) {
      INFO("step ", t + 1, ", element ", i);
      CHECK(actual[t][i] == doctest::Approx(expected[t][i]).epsilon(tolerance));
    }
  }
}

void check_close(const std::vector<double>& actual, const std::vector<double>& expected, double tolerance) {
  check_close(Trajectory{actual}, Trajectory{expected}, tolerance);
}

// f64 results differ from the reference only in rounding order (lerp, fused multiply-adds):
// a few ulps per step.
constexpr double kF64Tolerance = 1e-12;
}  // namespace

TEST_CASE("SGD follows PyTorch's update over 5 steps") {
  auto sgd = [](optim::SGDOptions o) { return [o](TensorList ps) { return optim::SGD(ps, o); }; };
  SUBCASE("plain") {
    const optim::SGDOptions o{.lr = 0.05};
    check_close(run(sgd(o)), reference_sgd(o), kF64Tolerance);
  }
  SUBCASE("momentum, dampening and weight decay") {
    const optim::SGDOptions o{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01};
    check_close(run(sgd(o)), reference_sgd(o), kF64Tolerance);
    // torch 1.13: SGD([p], lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)
    check_close(run(sgd(o)).back(), {0.98546173974697981, 1.5980947987709893, 0.62109848844947779}, kF64Tolerance);
  }
  SUBCASE("nesterov") {
    const optim::SGDOptions o{.lr = 0.05, .momentum = 0.9, .nesterov = true};
    check_close(run(sgd(o)), reference_sgd(o), kF64Tolerance);
    // torch 1.13: SGD([p], lr=0.05, momentum=0.9, nesterov=True)
    check_close(run(sgd(o)).back(), {1.0522908419499999, 0.85874141947499993, 0.28985576266406232}, kF64Tolerance);
  }
  SUBCASE("maximize negates the gradient before weight decay (PyTorch 2.x)") {
    const optim::SGDOptions o{.lr = 0.01, .momentum = 0.5, .weight_decay = 0.1, .maximize = true};
    check_close(run(sgd(o)), reference_sgd(o), kF64Tolerance);
  }
}

TEST_CASE("Adam follows PyTorch's update over 5 steps") {
  auto adam = [](optim::AdamOptions o) { return [o](TensorList ps) { return optim::Adam(ps, o); }; };
  SUBCASE("defaults but lr") {
    const optim::AdamOptions o{.lr = 0.1};
    check_close(run(adam(o)), reference_adam(o, false), kF64Tolerance);
    // torch 1.13: Adam([p], lr=0.1)
    check_close(run(adam(o)).back(), {0.97218554862939044, -1.0035274469633311, 1.5022246503069161}, kF64Tolerance);
  }
  SUBCASE("weight decay and amsgrad") {
    // beta2 = 0.5 lets v fall as the gradient shrinks, so amsgrad's running max matters.
    const optim::AdamOptions o{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.5, .weight_decay = 0.1, .amsgrad = true};
    check_close(run(adam(o)), reference_adam(o, false), kF64Tolerance);
    // torch 1.13: Adam([p], lr=0.1, betas=(0.8, 0.5), weight_decay=0.1, amsgrad=True)
    check_close(run(adam(o)).back(), {0.93844988520009609, -0.99818308798798006, 1.495973779812457}, kF64Tolerance);
  }
  SUBCASE("maximize") {
    const optim::AdamOptions o{.lr = 0.1, .weight_decay = 0.1, .maximize = true};
    check_close(run(adam(o)), reference_adam(o, false), kF64Tolerance);
  }
  SUBCASE("a beta1 below 0.5 takes lerp's other form") {
    const optim::AdamOptions o{.lr = 0.1, .beta1 = 0.3};
    check_close(run(adam(o)), reference_adam(o, false), kF64Tolerance);
  }
}

TEST_CASE("AdamW decays the weights apart from the gradient's moments") {
  auto adamw = [](optim::AdamWOptions o) { return [o](TensorList ps) { return optim::AdamW(ps, o); }; };
  SUBCASE("default weight decay") {
    const optim::AdamWOptions o{.lr = 0.1};
    check_close(run(adamw(o)), reference_adam(o, true), kF64Tolerance);
    // torch 1.13: AdamW([p], lr=0.1)
    check_close(run(adamw(o)).back(), {0.9690609071270806, -0.99710499330349844, 1.4932944350896324}, kF64Tolerance);
  }
  SUBCASE("amsgrad") {
    const optim::AdamWOptions o{.lr = 0.1, .beta2 = 0.5, .weight_decay = 0.5, .amsgrad = true};
    check_close(run(adamw(o)), reference_adam(o, true), kF64Tolerance);
    // torch 1.13: AdamW([p], lr=0.1, betas=(0.9, 0.5), weight_decay=0.5, amsgrad=True)
    check_close(run(adamw(o)).back(), {0.82241969391650038, -0.70741569662690229, 1.0916436632609494}, kF64Tolerance);
  }
}

TEST_CASE("options default to PyTorch's") {
  const optim::AdamOptions adam;
  CHECK(adam.lr == 1e-3);
  CHECK(adam.beta1 == 0.9);
  CHECK(adam.beta2 == 0.999);
  CHECK(adam.eps == 1e-8);
  CHECK(adam.weight_decay == 0.0);
  CHECK_FALSE(adam.amsgrad);
  CHECK(optim::AdamWOptions{.lr = 3e-4}.weight_decay == 1e-2);
  const optim::SGDOptions sgd;
  CHECK(sgd.momentum == 0.0);
  CHECK(sgd.dampening == 0.0);
  CHECK_FALSE(sgd.nesterov);
}

TEST_CASE("f32 parameters follow the f64 reference to float precision") {
  const optim::AdamWOptions o{.lr = 0.1, .beta2 = 0.5, .amsgrad = true};
  // ~1e-7 relative per rounding, a few dozen roundings over 5 steps.
  check_close(run([&](TensorList ps) { return optim::AdamW(ps, o); }, 5, DType::f32), reference_adam(o, true), 1e-5);
}

TEST_CASE("param groups train with their own hyperparameters") {
  Tensor a = tensor(std::vector<double>{1.0, 2.0}).requires_grad_();
  Tensor b = tensor(std::vector<double>{3.0}).requires_grad_();
  Tensor frozen = tensor(std::vector<double>{5.0}).requires_grad_();
  optim::SGD optimizer({a}, {.lr = 0.1});
  optimizer.add_param_group({b}, optim::SGDOptions{.lr = 0.01});
  optimizer.add_param_group({frozen});  // the optimizer's defaults; no gradient below
  CHECK(optimizer.num_param_groups() == 3);
  CHECK(optimizer.lr(1) == 0.01);
  CHECK(optimizer.hyperparameters(2).at("lr") == 0.1);

  (a.sum() + b.sum()).backward();
  optimizer.step();
  CHECK(test::values(a) == std::vector<double>{1.0 - 0.1, 2.0 - 0.1});
  CHECK(test::values(b) == std::vector<double>{3.0 - 0.01});
  CHECK(test::values(frozen) == std::vector<double>{5.0});  // no gradient: skipped, no state
  CHECK(optimizer.state(frozen) == nullptr);
}

TEST_CASE("zero_grad clears or zeroes the gradients of every group") {
  Tensor a = test::rand_input({2});
  Tensor b = test::rand_input({3});
  optim::Adam optimizer({a});
  optimizer.add_param_group({b});
  (a.sum() + b.sum()).backward();
  optimizer.zero_grad(/*set_to_none=*/false);
  CHECK(test::values(a.grad()) == std::vector<double>{0, 0});
  CHECK(test::values(b.grad()) == std::vector<double>{0, 0, 0});
  optimizer.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("a state_dict round trip continues the same trajectory") {
  const optim::AdamOptions o{.lr = 0.05, .weight_decay = 0.01, .amsgrad = true};
  auto make_params = [] {
    return TensorList{tensor(kStart).requires_grad_(), tensor(std::vector<double>{0.3, -0.7}).requires_grad_()};
  };
  auto train = [](optim::Adam& optimizer, TensorList& params, int steps) {
    for (int t = 0; t < steps; ++t) {
      optimizer.zero_grad();
      Quadratic().backward(params[0]);
      (params[1] * params[1]).sum().backward();
      optimizer.step();
    }
  };
  TensorList straight = make_params();
  optim::Adam uninterrupted({straight[0]}, o);
  uninterrupted.add_param_group({straight[1]}, optim::AdamOptions{.lr = 0.02});
  train(uninterrupted, straight, 5);

  TensorList first = make_params();
  optim::Adam before({first[0]}, o);
  before.add_param_group({first[1]}, optim::AdamOptions{.lr = 0.02});
  train(before, first, 2);
  const optim::OptimizerState saved = before.state_dict();
  CHECK(saved.tensors.count("state.0.max_exp_avg_sq") == 1);
  CHECK(saved.tensors.count("state.1.max_exp_avg_sq") == 0);  // group 1 has no amsgrad
  CHECK(saved.tensors.at("state.0.step").item<int64_t>() == 2);

  // A fresh optimizer, built with other settings, on copies of the parameters.
  TensorList resumed{first[0].detach().clone().requires_grad_(), first[1].detach().clone().requires_grad_()};
  optim::Adam after({resumed[0]}, optim::AdamOptions{.lr = 1.0});
  after.add_param_group({resumed[1]}, optim::AdamOptions{.lr = 1.0});
  after.load_state_dict(saved);
  CHECK(after.lr(1) == 0.02);
  CHECK(after.param_groups()[0].options.amsgrad);
  train(after, resumed, 3);
  // Bit-identical: the same operations on the same values.
  CHECK(test::values(resumed[0]) == test::values(straight[0]));
  CHECK(test::values(resumed[1]) == test::values(straight[1]));
}

TEST_CASE("load_state_dict lists every mismatch and changes nothing") {
  Tensor a = test::rand_input({3});
  Tensor b = test::rand_input({2, 2});
  optim::Adam source({a, b});
  (a.sum() + b.sum()).backward();
  source.step();
  const optim::OptimizerState state = source.state_dict();

  Tensor c = test::rand_input({3});
  Tensor d = test::rand_input({4});
  optim::Adam target({c, d}, {.lr = 0.5});
  SUBCASE("shapes") {
    CHECK_THROWS_WITH_AS(target.load_state_dict(state),
                         doctest::Contains("state.1.exp_avg has shape [2, 2], its parameter [4]"), Error);
    CHECK(target.lr(0) == 0.5);
    CHECK(target.state(c) == nullptr);
  }
  SUBCASE("type, group sizes, keys and hyperparameters") {
    optim::OptimizerState wrong = state;
    wrong.type = "SGD";
    wrong.group_sizes[0] = 5;
    wrong.tensors["state.7.exp_avg"] = zeros({3});
    wrong.tensors["state.0.velocity"] = zeros({3});
    wrong.param_groups[0].erase("eps");
    wrong.param_groups[0]["momentum"] = 0.9;
    try {
      target.load_state_dict(wrong);
      FAIL("load_state_dict accepted a mismatched state");
    } catch (const Error& error) {
      const std::string message = error.what();
      CHECK(message.find("saved by SGD") != std::string::npos);
      CHECK(message.find("group 0 has 5 parameters, this optimizer's 2") != std::string::npos);
      CHECK(message.find("state.7.exp_avg names parameter 7") != std::string::npos);
      CHECK(message.find("unknown state field 'velocity'") != std::string::npos);
      CHECK(message.find("unknown hyperparameters momentum") != std::string::npos);
      CHECK(message.find("missing hyperparameters eps") != std::string::npos);
    }
  }
}

TEST_CASE("load_state_dict refuses a state tensor of another dtype, a step below 1 and an invalid hyperparameter") {
  Tensor a = test::rand_input({3});
  optim::Adam source({a});
  a.sum().backward();
  source.step();
  const optim::OptimizerState state = source.state_dict();

  Tensor c = test::rand_input({3});
  optim::Adam target({c}, {.lr = 0.5});
  optim::OptimizerState wrong = state;
  wrong.tensors["state.0.exp_avg"] = state.tensors.at("state.0.exp_avg").to(DType::i32);
  wrong.tensors["state.0.step"] = scalar_tensor(-1000, {DType::i64});
  wrong.param_groups[0]["lr"] = -1.0;
  try {
    target.load_state_dict(wrong);
    FAIL("load_state_dict accepted an impossible state");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("state.0.exp_avg is i32, its parameter f64") != std::string::npos);
    CHECK(message.find("state.0.step is -1000; a saved step count is at least 1") != std::string::npos);
    CHECK(message.find("group 0: Adam/AdamW: invalid learning rate -1 (lr must be finite and >= 0)") !=
          std::string::npos);
  }
  CHECK(target.lr(0) == 0.5);
  CHECK(target.state(c) == nullptr);

  wrong = state;
  wrong.tensors["state.0.step"] = scalar_tensor(1, {DType::f32});
  CHECK_THROWS_WITH_AS(target.load_state_dict(wrong), doctest::Contains("state.0.step is f32, not i64"), Error);
  optim::Hyperparameters negative_lr = target.hyperparameters(0);
  negative_lr["lr"] = -1.0;
  CHECK_THROWS_WITH_AS(target.set_hyperparameters(0, negative_lr), doctest::Contains("invalid learning rate -1"),
                       Error);
  CHECK(target.lr(0) == 0.5);
}

TEST_CASE("the fused update is the same on strided, contiguous, threaded and 16-bit parameters") {
  // 257 x 131 elements: more than kParallelGrain, so the loop is split across threads.
  const Shape shape{257, 131};
  const AdamStep step{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .step = 3};
  auto fresh_state = [&](const Tensor& like) {
    NoGradGuard no_grad;
    return TensorList{rand_like(like, &test::rng()), rand_like(like, &test::rng()) * 0.01,
                      rand_like(like, &test::rng()) * 0.02};
  };
  Tensor strided_param = test::noncontiguous_input(shape).detach();
  Tensor strided_grad = test::noncontiguous_input(shape).detach();
  TensorList strided_state = fresh_state(strided_param);
  REQUIRE_FALSE(strided_param.is_contiguous());
  Tensor param = strided_param.contiguous();
  Tensor grad = strided_grad.contiguous();
  TensorList state{strided_state[0].clone(), strided_state[1].clone(), strided_state[2].clone()};
  {
    test::NumThreadsGuard one_thread(1);
    kernels::adam_step(strided_param, strided_grad, strided_state[0], strided_state[1], strided_state[2], step);
  }
  {
    test::NumThreadsGuard two_threads(2);
    kernels::adam_step(param, grad, state[0], state[1], state[2], step);
  }
  CHECK(test::values(param) == test::values(strided_param));
  CHECK(test::values(state[0]) == test::values(strided_state[0]));
  CHECK(test::values(state[2]) == test::values(strided_state[2]));

  SUBCASE("bf16 computes in float and rounds once") {
    Tensor p16 = param.to(DType::bf16), g16 = grad.to(DType::bf16);
    Tensor m16 = zeros_like(p16), v16 = zeros_like(p16);
    Tensor p32 = p16.to(DType::f32), g32 = g16.to(DType::f32);
    Tensor m32 = zeros_like(p32), v32 = zeros_like(p32);
    const AdamStep first{.lr = 0.01, .weight_decay = 0.1, .step = 1};
    kernels::adam_step(p16, g16, m16, v16, Tensor(), first);
    kernels::adam_step(p32, g32, m32, v32, Tensor(), first);
    CHECK(test::values(p16) == test::values(p32.to(DType::bf16)));
    CHECK(test::values(m16) == test::values(m32.to(DType::bf16)));
  }
  SUBCASE("SGD with momentum on strided memory") {
    const SGDStep sgd{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .first_step = false};
    kernels::sgd_step(strided_param, strided_grad, strided_state[0], sgd);
    kernels::sgd_step(param, grad, state[0], sgd);
    CHECK(test::values(param) == test::values(strided_param));
    CHECK(test::values(state[0]) == test::values(strided_state[0]));
  }
}

TEST_CASE("a step bumps the parameter's version so a stale graph is refused") {
  Tensor p = test::rand_input({3});
  optim::SGD optimizer({p}, {.lr = 0.1});
  (p * p).sum().backward();
  Tensor stale = (p * p).sum();  // saved p before the step
  optimizer.step();
  CHECK_THROWS_AS(stale.backward(), Error);
}

TEST_CASE("optimizers refuse invalid options, shared parameters and mismatched gradients") {
  Tensor p = test::rand_input({3});
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = -1.0}), doctest::Contains("invalid learning rate -1"), Error);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = inf}), doctest::Contains("invalid learning rate inf"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW({p}, {.lr = std::nan("")}), doctest::Contains("invalid learning rate nan"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = 0.1, .momentum = inf}), doctest::Contains("invalid momentum inf"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, {.weight_decay = inf}), doctest::Contains("invalid weight_decay inf"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.nesterov = true}), doctest::Contains("Nesterov"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam({p}, {.beta2 = 1.0}), doctest::Contains("invalid beta2 1"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW(TensorList{}), doctest::Contains("empty parameter list"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam({p, p}), doctest::Contains("more than one parameter group"), Error);
  optim::Adam optimizer({p});
  CHECK_THROWS_WITH_AS(optimizer.add_param_group({p}), doctest::Contains("more than one parameter group"), Error);
  CHECK_THROWS_WITH_AS(optimizer.add_param_group({p * 2}), doctest::Contains("not a leaf"), Error);
  p.set_grad(zeros({3}));  // f32 gradient for an f64 parameter
  CHECK_THROWS_WITH_AS(optimizer.step(), doctest::Contains("gradient of parameter 0 of group 0 is f32"), Error);
}

TEST_CASE("state that no longer matches its parameter is refused, not misread") {
  Tensor p = test::rand_input({3});
  optim::Adam optimizer({p});
  p.sum().backward();
  optimizer.step();
  p.set_data(p.detach().to(DType::f32));  // as Module::to(f32) does, after the state was made
  p.set_grad(ones({3}));
  CHECK_THROWS_WITH_AS(optimizer.step(), doctest::Contains("exp_avg is f64 [3] on cpu, the parameter f32 [3]"), Error);
  CHECK(optimizer.state(p)->step == 1);
}

// ---- learning-rate schedulers ----

namespace {
// The lr of group 0 at steps 0 .. n-1.
template <typename Scheduler>
std::vector<double> lr_sequence(optim::Optimizer& optimizer, Scheduler& scheduler, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(optimizer.lr(0));
    CHECK(scheduler.get_last_lr()[0] == optimizer.lr(0));
    scheduler.step();
  }
  return out;
}

struct OneParam {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD optimizer{{p}, {.lr = 0.1}};
};
}  // namespace

TEST_CASE("StepLR multiplies by gamma every step_size steps") {
  OneParam setup;
  optim::StepLR scheduler(setup.optimizer, /*step_size=*/3, /*gamma=*/0.5);
  // torch 1.13: StepLR(SGD([p], lr=0.1), step_size=3, gamma=0.5), lr before each of 12 steps
  check_close(lr_sequence(setup.optimizer, scheduler, 12),
              {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125}, 1e-15);
  CHECK(scheduler.last_epoch() == 12);
}

TEST_CASE("CosineAnnealingLR matches PyTorch's values, through and past T_max") {
  OneParam setup;
  optim::CosineAnnealingLR scheduler(setup.optimizer, /*T_max=*/5, /*eta_min=*/0.01);
  // torch 1.13: CosineAnnealingLR(SGD([p], lr=0.1), T_max=5, eta_min=0.01) (its recursive form)
  check_close(lr_sequence(setup.optimizer, scheduler, 12),
              {0.10000000000000001, 0.091405764746872634, 0.068905764746872628, 0.041094235253127359,
               0.018594235253127367, 0.01, 0.018594235253127367, 0.041094235253127387, 0.068905764746872669,
               0.091405764746872689, 0.10000000000000006, 0.091405764746872717},
              1e-14);  // closed form vs PyTorch's recursion: a few ulps apart
}

TEST_CASE("LambdaLR scales each group's base lr") {
  Tensor a = zeros({1}).requires_grad_(), b = zeros({1}).requires_grad_();
  optim::Adam optimizer({a}, {.lr = 0.1});
  optimizer.add_param_group({b}, optim::AdamOptions{.lr = 0.3});
  optim::LambdaLR scheduler(optimizer, [](int64_t epoch) { return 1.0 / static_cast<double>(epoch + 1); });
  scheduler.step();
  scheduler.step();
  check_close(scheduler.get_last_lr(), {0.1 / 3, 0.3 / 3}, 1e-15);
  CHECK(scheduler.base_lrs() == std::vector<double>{0.1, 0.3});
}

TEST_CASE("WarmupCosineLR warms up linearly, then decays along a cosine to min_lr") {
  OneParam setup;
  optim::WarmupCosineLR scheduler(setup.optimizer, /*warmup_steps=*/4, /*total_steps=*/10, /*min_lr=*/0.01);
  const std::vector<double> lrs = lr_sequence(setup.optimizer, scheduler, 13);
  // warm-up: 0.1 * (t + 1) / 5; step 4 starts the cosine at the base lr; step 7 is halfway
  // (0.01 + 0.09 / 2); from step 10 on, min_lr.
  check_close(std::vector<double>(lrs.begin(), lrs.begin() + 5), {0.02, 0.04, 0.06, 0.08, 0.1}, 1e-15);
  CHECK(lrs[7] == doctest::Approx(0.055).epsilon(1e-14));
  CHECK(lrs[5] == doctest::Approx(0.01 + 0.09 * (1 + std::sqrt(3.0) / 2) / 2).epsilon(1e-14));  // cos(pi/6)
  CHECK(lrs[10] == doctest::Approx(0.01).epsilon(1e-14));
  CHECK(lrs[12] == 0.01);
  for (int t = 5; t <= 10; ++t) CHECK(lrs[t] < lrs[t - 1]);
}

TEST_CASE("get_schedule_factor warms up, then follows HF's linear, cosine and constant schedules") {
  // 4 warm-up steps of 12 in all: the warm-up gives step / 4, and the decay spans steps 4 .. 12,
  // so after step s its progress is (s - 4) / 8.
  //   step:      3 (warm-up)   4 (warm-up end)       8 (midway)                  12 (the end)
  //   linear     3/4           (12 - 4) / 8 = 1      (12 - 8) / 8 = 0.5          (12 - 12) / 8 = 0
  //   cosine     3/4           (1 + cos 0) / 2 = 1   (1 + cos(pi/2)) / 2 = 0.5   (1 + cos pi) / 2 = 0
  //   constant   3/4           1                     1                           1
  // A quarter of the way, step 6, tells linear from cosine: 6/8 = 0.75 against
  // (1 + cos(pi/4)) / 2 = (2 + sqrt(2)) / 4 = 0.8535...; past the end, step 14, linear stays at
  // max(0, -2/8) = 0.
  struct Expected {
    std::string name;
    double warmup_end, quarter, midway, end;
  };
  for (const Expected& expected :
       {Expected{"linear", 1.0, 0.75, 0.5, 0.0}, Expected{"cosine", 1.0, (2.0 + std::sqrt(2.0)) / 4.0, 0.5, 0.0},
        Expected{"constant", 1.0, 1.0, 1.0, 1.0}, Expected{"constant_with_warmup", 1.0, 1.0, 1.0, 1.0}}) {
    CAPTURE(expected.name);
    const auto factor = [&](int64_t step) { return optim::get_schedule_factor(expected.name, step, 4, 12); };
    CHECK(factor(0) == 0.0);
    CHECK(factor(3) == 0.75);
    CHECK(factor(4) == doctest::Approx(expected.warmup_end).epsilon(1e-15));
    CHECK(factor(6) == doctest::Approx(expected.quarter).epsilon(1e-15));
    CHECK(factor(8) == doctest::Approx(expected.midway).epsilon(1e-15));
    CHECK(factor(12) == doctest::Approx(expected.end).epsilon(1e-15));
  }
  CHECK(optim::get_schedule_factor("linear", 14, 4, 12) == 0.0);
  // Without a warm-up the schedule starts at the base lr: linear 12/12 at step 0.
  CHECK(optim::get_schedule_factor("linear", 0, 0, 12) == 1.0);
  // Also refused inside the warm-up, where the name does not change the value.
  for (const int64_t step : {0, 5})
    CHECK_THROWS_WITH_AS(optim::get_schedule_factor("polynomial", step, 4, 12),
                         doctest::Contains("unknown schedule \"polynomial\""), Error);
}

TEST_CASE("a scheduler resumes from its state_dict") {
  OneParam original;
  optim::CosineAnnealingLR scheduler(original.optimizer, 20, 0.001);
  for (int i = 0; i < 7; ++i) scheduler.step();
  OneParam resumed;
  optim::CosineAnnealingLR restored(resumed.optimizer, 20, 0.001);
  restored.load_state_dict(scheduler.state_dict());
  CHECK(restored.last_epoch() == 7);
  CHECK(resumed.optimizer.lr(0) == original.optimizer.lr(0));
  scheduler.step();
  restored.step();
  CHECK(resumed.optimizer.lr(0) == original.optimizer.lr(0));
}

TEST_CASE("schedulers refuse invalid arguments") {
  OneParam setup;
  CHECK_THROWS_WITH_AS(optim::StepLR(setup.optimizer, 0), doctest::Contains("step_size must be positive"), Error);
  CHECK_THROWS_WITH_AS(optim::CosineAnnealingLR(setup.optimizer, 0), doctest::Contains("T_max"), Error);
  CHECK_THROWS_WITH_AS(optim::WarmupCosineLR(setup.optimizer, 10, 10), doctest::Contains("warmup_steps"), Error);
  CHECK(setup.optimizer.lr(0) == 0.1);
}

// ---- gradient clipping ----

namespace {
struct TwoGrads {
  Tensor a = zeros({2}, {DType::f64}).requires_grad_();
  Tensor b = zeros({2, 2}, {DType::f64}).requires_grad_();
  Tensor no_grad = zeros({1}, {DType::f64}).requires_grad_();
  explicit TwoGrads(double first = 3.0) {
    a.set_grad(tensor(std::vector<double>{first, -4.0}));
    b.set_grad(tensor(std::vector<double>{1.0, 2.0, -2.0, 0.5}, {2, 2}));
  }
  TensorList params() const { return {a, no_grad, b}; }
};
}  // namespace

TEST_CASE("clip_grad_norm_ scales every gradient by max_norm / total_norm") {
  TwoGrads grads;
  const double total = optim::clip_grad_norm_(grads.params(), 2.0);
  // torch 1.13: clip_grad_norm_([a, b], 2.0) on the same f64 gradients; total = sqrt(25 + 9.25)
  CHECK(total == doctest::Approx(5.8523499553598128).epsilon(1e-15));
  check_close(test::values(grads.a.grad()), {1.0252290140776612, -1.366972018770215}, 1e-15);
  check_close(test::values(grads.b.grad()),
              {0.34174300469255375, 0.6834860093851075, -0.6834860093851075, 0.17087150234627688}, 1e-15);
  CHECK_FALSE(grads.no_grad.grad().defined());
}

TEST_CASE("clip_grad_norm_ with the inf norm uses the largest magnitude") {
  TwoGrads grads;
  const double total = optim::clip_grad_norm_(grads.params(), 2.0, optim::kInfNorm);
  // torch 1.13: clip_grad_norm_([a, b], 2.0, norm_type=inf); the factor is 2 / (4 + 1e-6)
  CHECK(total == 4.0);
  check_close(test::values(grads.a.grad()), {1.4999996250000938, -1.999999500000125}, 1e-15);
}

TEST_CASE("clip_grad_norm_ leaves gradients under max_norm unchanged") {
  TwoGrads grads;
  CHECK(optim::clip_grad_norm_(grads.params(), 100.0, 1.0) == 12.5);  // the 1-norm: 3 + 4 + 1 + 2 + 2 + 0.5
  CHECK(test::values(grads.a.grad()) == std::vector<double>{3.0, -4.0});
  CHECK(optim::clip_grad_norm_({grads.no_grad}, 1.0) == 0.0);
}

TEST_CASE("clip_grad_norm_ with a non-finite norm throws or multiplies as PyTorch does") {
  const double inf = std::numeric_limits<double>::infinity();
  SUBCASE("error_if_nonfinite") {
    TwoGrads grads(inf);
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm_(grads.params(), 2.0, 2.0, /*error_if_nonfinite=*/true),
                         doctest::Contains("is inf"), Error);
    CHECK(test::values(grads.b.grad())[0] == 1.0);
  }
  SUBCASE("an infinite norm zeroes the finite entries") {
    TwoGrads grads(inf);
    // torch 1.13: a.grad becomes [nan, -0.0], b.grad all zeros
    CHECK(std::isinf(optim::clip_grad_norm_(grads.params(), 2.0)));
    CHECK(std::isnan(test::values(grads.a.grad())[0]));
    CHECK(test::values(grads.b.grad()) == std::vector<double>{0, 0, 0, 0});
  }
  SUBCASE("a NaN spreads to every gradient") {
    TwoGrads grads(std::numeric_limits<double>::quiet_NaN());
    CHECK(std::isnan(optim::clip_grad_norm_(grads.params(), 2.0, optim::kInfNorm)));
    for (double g : test::values(grads.b.grad())) CHECK(std::isnan(g));
  }
}

TEST_CASE("clip_grad_norm_ combines gradients of different dtypes") {
  Tensor wide = zeros({2}, {DType::f64}).requires_grad_(), narrow = zeros({2}, {DType::f32}).requires_grad_();
  wide.set_grad(tensor(std::vector<double>{3.0, -4.0}));
  narrow.set_grad(tensor(std::vector<double>{12.0, 0.0}).to(DType::f32));
  CHECK(optim::clip_grad_norm_({wide, narrow}, 1e9) == 13.0);  // sqrt(9 + 16 + 144)
  CHECK(optim::clip_grad_norm_({wide, narrow}, 1e9, optim::kInfNorm) == 12.0);
  CHECK(optim::summed_norm_powers({wide.grad(), narrow.grad()}, 1.0).item() == 19.0);
}

TEST_CASE("clip_grad_value_ clamps every gradient element") {
  TwoGrads grads;
  optim::clip_grad_value_(grads.params(), 1.5);
  CHECK(test::values(grads.a.grad()) == std::vector<double>{1.5, -1.5});
  CHECK(test::values(grads.b.grad()) == std::vector<double>{1.0, 1.5, -1.5, 0.5});
}
