// The backward engine's behaviour: graph shapes, accumulation, hooks, modes and errors.
#include <any>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/custom_function.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "helpers.h"

using namespace sg;

TEST_CASE("a diamond graph sums the gradients of both paths") {
  Tensor x = test::rand_input({4});
  Tensor a = x * 2.0;
  Tensor b = x.exp();
  Tensor y = (a * b).sum();  // d/dx = 2 e^x + 2x e^x
  y.backward();
  const auto xs = test::values(x), grads = test::values(x.grad());
  for (size_t i = 0; i < xs.size(); ++i)
    CHECK(grads[i] == doctest::Approx(2 * std::exp(xs[i]) * (1 + xs[i])).epsilon(1e-12));
}

TEST_CASE("a subexpression used twice contributes twice") {
  Tensor x = test::rand_input({3});
  Tensor s = x * x;
  Tensor y = (s + s).sum();  // d/dx = 4x
  y.backward();
  CHECK(test::max_abs_diff(x.grad(), x.detach() * 4.0) < 1e-12);
}

TEST_CASE("gradients accumulate in leaves across backward calls") {
  Tensor x = test::rand_input({2, 3});
  (x * 3.0).sum().backward();
  (x * 2.0).sum().backward();
  CHECK(test::max_abs_diff(x.grad(), full({2, 3}, 5.0, {DType::f64})) == 0.0);
}

TEST_CASE("the first gradient of a leaf is not shared with another leaf") {
  // x + y passes the same gradient tensor to both leaves; accumulating into one must not touch the other.
  Tensor x = test::rand_input({3});
  Tensor y = test::rand_input({3});
  (x + y).sum().backward();
  x.mutable_grad().add_(1.0);
  CHECK(test::values(y.grad()) == std::vector<double>{1, 1, 1});
}

TEST_CASE("backward without retain_graph frees the graph and a second backward is an error") {
  Tensor x = test::rand_input({3});
  Tensor y = (x * x).sum();
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("second time"), Error);
}

TEST_CASE("retain_graph allows a second backward that accumulates") {
  Tensor x = test::rand_input({3});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(test::max_abs_diff(x.grad(), x.detach() * 4.0) < 1e-12);
}

TEST_CASE("backward on a tensor that needs no grad is an error naming the cause") {
  Tensor x = randn({3});
  CHECK_THROWS_WITH_AS(x.sum().backward(), doctest::Contains("does not require grad"), Error);
}

TEST_CASE("backward of a non-scalar needs an explicit gradient of the same shape") {
  Tensor x = test::rand_input({2, 2});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("scalar outputs"), Error);
  CHECK_THROWS_WITH_AS(y.backward(ones({3}, {DType::f64})), doctest::Contains("[2, 2]"), Error);
  Tensor weights = test::rand_input({2, 2}).detach();
  y.backward(weights);
  CHECK(test::max_abs_diff(x.grad(), weights * 2.0) < 1e-15);
}

TEST_CASE("NoGradGuard records no history and restores the mode") {
  Tensor x = test::rand_input({3});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    { NoGradGuard nested; }
    CHECK_FALSE(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
  CHECK((x * 2.0).requires_grad());
}

TEST_CASE("GradModeGuard sets the mode it is given for its scope and restores the previous one") {
  Tensor x = test::rand_input({3});
  {
    GradModeGuard off(false);
    CHECK_FALSE((x * 2.0).requires_grad());
    {
      GradModeGuard on(true);  // inside a no-grad region, as set_grad_enabled(True) in PyTorch
      CHECK(GradMode::is_enabled());
      CHECK((x * 2.0).grad_fn() != nullptr);
      {
        NoGradGuard nested;
        CHECK_FALSE(GradMode::is_enabled());
      }
      CHECK(GradMode::is_enabled());
    }
    CHECK_FALSE(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
  {
    GradModeGuard unchanged(true);
    CHECK(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
}

TEST_CASE("leaves and non-leaves are told apart and detach cuts history") {
  Tensor x = test::rand_input({3});
  Tensor y = x.exp();
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.grad_fn()->name() == "ExpBackward");
  Tensor d = y.detach();
  CHECK(d.is_leaf());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == y.storage());  // same data
}

TEST_CASE("a tensor hook sees and can replace the gradient flowing into a non-leaf") {
  Tensor x = test::rand_input({3});
  Tensor y = x * 2.0;
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    seen = test::values(g);
    return g * 10.0;
  });
  y.sum().backward();
  CHECK(seen == std::vector<double>{1, 1, 1});
  CHECK(test::values(x.grad()) == std::vector<double>{20, 20, 20});
}

TEST_CASE("a leaf hook runs before accumulation") {
  Tensor x = test::rand_input({2});
  x.register_hook([](const Tensor& g) { return g * 0.5; });
  (x * 4.0).sum().backward();
  CHECK(test::values(x.grad()) == std::vector<double>{2, 2});
}

TEST_CASE("post-accumulate hooks fire in backward order, each after its leaf's grad is ready") {
  // A chain w1 -> w2 -> w3 (like layers); backward reaches w3 first, w1 last.
  Tensor w1 = test::rand_input({2}), w2 = test::rand_input({2}), w3 = test::rand_input({2});
  std::vector<std::string> order;
  auto watch = [&](Tensor& w, const std::string& name) {
    w.register_post_accumulate_grad_hook([&order, name](Tensor& leaf) {
      CHECK(leaf.grad().defined());
      order.push_back(name);
    });
  };
  watch(w1, "w1");
  watch(w2, "w2");
  watch(w3, "w3");
  Tensor h = (w1 * 2.0).tanh();
  h = (h * w2).tanh();
  h = (h * w3).sum();
  h.backward();
  CHECK(order == std::vector<std::string>{"w3", "w2", "w1"});
}

TEST_CASE("queued callbacks run once after the last node of backward, in order, outside backward it throws") {
  Tensor w1 = test::rand_input({3}), w2 = test::rand_input({3});
  std::vector<std::string> events;
  w2.register_post_accumulate_grad_hook([&](Tensor&) {
    events.push_back("w2");
    autograd::queue_callback([&] {
      // Runs after every gradient, including w1's (which backward reaches after w2's).
      CHECK(w1.grad().defined());
      events.push_back("first");
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
    autograd::queue_callback([&] { events.push_back("second"); });
  });
  w1.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("w1"); });
  ((w1 * 2.0).tanh() * w2).sum().backward();
  CHECK(events == std::vector<std::string>{"w2", "w1", "first", "second", "queued by a callback"});
  CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}), doctest::Contains("no backward pass"), sg::Error);
}

TEST_CASE("retain_grad keeps the gradient of a non-leaf") {
  Tensor x = test::rand_input({3});
  Tensor y = x * 3.0;
  y.retain_grad();
  (y * y).sum().backward();
  CHECK(test::max_abs_diff(y.grad(), y.detach() * 2.0) < 1e-12);
}

TEST_CASE("modifying a saved tensor in place makes backward fail instead of computing garbage") {
  Tensor x = test::rand_input({3});
  Tensor y = x * 1.0;
  Tensor z = y.exp();  // exp saves its output z
  {
    NoGradGuard no_grad;
    z.mul_(2.0);
  }
  CHECK_THROWS_WITH_AS(z.sum().backward(), doctest::Contains("in-place"), Error);
}

TEST_CASE("in-place ops on non-leaves are differentiable") {
  Tensor x = test::rand_input({4});
  Tensor y = x * 2.0;
  y.mul_(x);       // y = 2x^2
  y.add_(x, 3.0);  // y = 2x^2 + 3x
  y.sum().backward();
  CHECK(test::max_abs_diff(x.grad(), x.detach() * 4.0 + 3.0) < 1e-12);
}

TEST_CASE("in-place on a leaf that requires grad is refused outside NoGradGuard") {
  Tensor x = test::rand_input({2});
  CHECK_THROWS_WITH_AS(x.add_(1.0), doctest::Contains("leaf"), Error);
  NoGradGuard no_grad;
  x.add_(1.0);  // allowed: this is how optimizers update parameters
}

TEST_CASE("in-place on a view of a tensor that requires grad is refused") {
  Tensor x = test::rand_input({2, 3});
  Tensor y = x * 1.0;
  Tensor row = y.select(0, 0);
  CHECK_THROWS_WITH_AS(row.mul_(2.0), doctest::Contains("view"), Error);
}

TEST_CASE("gradients flow only into inputs that require them") {
  Tensor x = test::rand_input({3});
  Tensor c = randn({3}, {DType::f64}, &test::rng());
  (x * c).sum().backward();
  CHECK_FALSE(c.grad().defined());
  CHECK(test::max_abs_diff(x.grad(), c) == 0.0);
}

TEST_CASE("gradcheck reports a wrong derivative") {
  // A deliberately wrong backward: claims d/dx x^2 = x.
  auto wrong_square = [](const TensorList& in) {
    Tensor out = in[0].detach() * in[0].detach();
    return autograd::record_view(
        "WrongSquare", out, in[0],
        [x = in[0].detach()](const Tensor& g, const autograd::NeedsGrad&) { return TensorList{g * x}; });
  };
  const auto result = gradcheck(wrong_square, {test::rand_input({3}, 0.5, 1.0)});
  CHECK_FALSE(result.ok);
  CHECK(result.message.find("numeric") != std::string::npos);
}

TEST_CASE("gradients arrive in each leaf's dtype") {
  Tensor x = randn({3}).requires_grad_();  // f32
  Tensor y = (x.to(DType::f64) * 2.0).sum();
  y.backward();
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(test::values(x.grad()) == std::vector<double>{2, 2, 2});
}

TEST_CASE("a leaf gradient never shares memory with another leaf's gradient through a view") {
  // AddBackward hands one gradient to x and to w's ViewBackward, whose output is a view of it.
  Tensor x = test::rand_input({2, 3});
  Tensor w = test::rand_input({6});
  (x + w.reshape({2, 3})).sum().backward();
  x.mutable_grad().mul_(5.0);
  CHECK(test::values(w.grad()) == std::vector<double>(6, 1.0));
  CHECK(test::values(x.grad()) == std::vector<double>(6, 5.0));
}

namespace {

// y = scale * (a - b)^2, with its backward by hand.
struct ScaledSquaredDifference {
  static Tensor forward(autograd::FunctionContext& ctx, const Tensor& a, const Tensor& b, double scale) {
    CHECK(!GradMode::is_enabled());  // forward's own ops record nothing
    const Tensor difference = a - b;
    ctx.save_for_backward({difference});
    ctx.saved_data["scale"] = scale;
    return difference * difference * scale;
  }
  // d/da = 2 scale (a - b), d/db = -2 scale (a - b); scale is not a tensor
  static TensorList backward(autograd::FunctionContext& ctx, const TensorList& grad_outputs) {
    const Tensor difference = ctx.saved_tensors()[0];
    const Tensor grad_a = grad_outputs[0] * difference * (2.0 * std::any_cast<double>(ctx.saved_data.at("scale")));
    return {ctx.needs_input_grad()[0] ? grad_a : Tensor(), ctx.needs_input_grad()[1] ? -grad_a : Tensor(), Tensor()};
  }
};

struct ForgetsAGradient {
  static constexpr const char* name = "ForgetsAGradient";
  static Tensor forward(autograd::FunctionContext&, const Tensor& a, const Tensor& b) { return a * b; }
  static TensorList backward(autograd::FunctionContext&, const TensorList& grad_outputs) { return {grad_outputs[0]}; }
};

struct Doubler {
  static Tensor forward(autograd::FunctionContext&, const Tensor& x) { return x * 2.0; }
  static TensorList backward(autograd::FunctionContext&, const TensorList& grad_outputs) {
    return {grad_outputs[0].sum()};  // wrong shape
  }
};

}  // namespace

TEST_CASE("a custom Function's hand-written backward passes gradcheck in f64") {
  using Op = autograd::Function<ScaledSquaredDifference>;
  CHECK_GRADCHECK([](const TensorList& in) { return Op::apply(in[0], in[1], 0.75); },
                  {test::noncontiguous_input({3, 4}), test::rand_input({3, 4})});
}

TEST_CASE("a custom Function is one node named after its struct, and needs_input_grad follows the inputs") {
  const Tensor a = test::rand_input({5});
  const Tensor b = test::rand_input({5}).detach();
  const Tensor y = autograd::Function<ScaledSquaredDifference>::apply(a, b, 3.0);
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "ScaledSquaredDifferenceBackward");
  y.sum().backward();
  CHECK(test::max_abs_diff(a.grad(), (a.detach() - b) * 6.0) < 1e-12);  // 2 * 3 * (a - b)
  CHECK(!b.grad().defined());
  // without any input that requires grad nothing is recorded
  CHECK(!autograd::Function<ScaledSquaredDifference>::apply(a.detach(), b, 3.0).requires_grad());
}

TEST_CASE("a custom Function whose backward returns a wrong count or shape names itself and the numbers") {
  const Tensor a = test::rand_input({2}), b = test::rand_input({2});
  CHECK_THROWS_WITH_AS(autograd::Function<ForgetsAGradient>::apply(a, b).sum().backward(),
                       doctest::Contains("ForgetsAGradientBackward: backward returned 1 gradients, but forward "
                                         "took 2 arguments"),
                       Error);
  CHECK_THROWS_WITH_AS(autograd::Function<Doubler>::apply(a).sum().backward(),
                       doctest::Contains("DoublerBackward: backward returned a gradient of shape [] for argument 0 "
                                         "of shape [2]"),
                       Error);
}

// Note [A gradient written where it lands] (autograd/engine.cpp): a leaf's grad_home, as DDP sets
// it to the leaf's slot in a bucket. The slot sits inside a larger buffer, whose other values the
// backward must leave alone.
namespace {

struct HomedWeight {
  Tensor buffer, home, weight;
  explicit HomedWeight(const Shape& shape = {4, 2, 3, 3}) {
    buffer = test::rand_input({3 + numel_of(shape) + 5}).detach().to(DType::f32);
    home = buffer.narrow(0, 3, numel_of(shape)).view(shape);
    weight = test::rand_input(shape).detach().to(DType::f32).requires_grad_();
    autograd::ensure_meta(weight).grad_home = home;
  }
  // The buffer's values outside the home.
  std::vector<double> around_home() const {
    const std::vector<double> all = test::values(buffer);
    return {all[0], all[1], all[2], all[all.size() - 5], all.back()};
  }
};

// conv2d(input, weight) summed with fixed random weights, so every gradient element differs.
Tensor conv_loss(const Tensor& input, const Tensor& weight) {
  const Tensor out = conv2d(input, weight, Tensor(), 1, 1);
  Generator generator(7);
  return (out * randn(out.sizes(), {}, &generator)).sum();
}

}  // namespace

TEST_CASE("a conv2d weight's gradient is written straight into its home, and nothing else of the buffer") {
  HomedWeight homed;
  const Tensor input = test::rand_input({2, 2, 5, 6}).detach().to(DType::f32);
  const Tensor plain = homed.weight.detach().clone().requires_grad_();
  conv_loss(input, plain).backward();
  const std::vector<double> around_before = homed.around_home();
  conv_loss(input, homed.weight).backward();
  CHECK(homed.weight.grad().is_same(homed.home));
  CHECK(test::values(homed.weight.grad()) == test::values(plain.grad()));
  CHECK(homed.around_home() == around_before);
}

TEST_CASE("a homed weight used twice gets the sum of both uses, and one that holds a gradient accumulates") {
  HomedWeight homed;
  const Tensor a = test::rand_input({2, 2, 5, 6}).detach().to(DType::f32);
  const Tensor b = test::rand_input({1, 2, 4, 4}).detach().to(DType::f32);
  const Tensor plain = homed.weight.detach().clone().requires_grad_();
  (conv_loss(a, plain) + conv_loss(b, plain)).backward();
  (conv_loss(a, homed.weight) + conv_loss(b, homed.weight)).backward();
  CHECK(test::values(homed.weight.grad()) == test::values(plain.grad()));

  // A second backward adds into the gradient held, wherever it is; the home is not written again.
  const std::vector<double> home_before = test::values(homed.home);
  const bool held_in_home = homed.weight.grad().is_same(homed.home);
  (conv_loss(a, plain) + conv_loss(b, plain)).backward();
  (conv_loss(a, homed.weight) + conv_loss(b, homed.weight)).backward();
  CHECK(test::max_abs_diff(homed.weight.grad(), plain.grad()) < 1e-5);
  if (!held_in_home) CHECK(test::values(homed.home) == home_before);
}

TEST_CASE("a homed weight used inside and outside a checkpointed segment gets the sum of both uses") {
  HomedWeight homed;
  const Tensor a = test::rand_input({2, 2, 5, 6}).detach().to(DType::f32).requires_grad_();
  const Tensor b = test::rand_input({1, 2, 4, 4}).detach().to(DType::f32);
  const Tensor plain = homed.weight.detach().clone().requires_grad_();
  const auto loss_of = [&](const Tensor& weight) {
    // The segment's input needs a gradient, so its backward (a nested pass) runs after the outer
    // use's, which reaches the weight first.
    const Tensor inside = autograd::checkpoint([&](const Tensor& x) { return conv_loss(x, weight); }, a * 2.0);
    return inside + conv_loss(b, weight);
  };
  loss_of(plain).backward();
  loss_of(homed.weight).backward();
  CHECK(test::max_abs_diff(homed.weight.grad(), plain.grad()) < 1e-5);
}

namespace {

// linear(input, weight, bias) summed with fixed random weights: addmm with weight.t(), a view.
Tensor linear_loss(const Tensor& input, const Tensor& weight) {
  const Tensor bias = full({weight.size(0)}, 0.25);
  const Tensor out = linear(input, weight, bias);
  Generator generator(11);
  return (out * randn(out.sizes(), {}, &generator)).sum();
}

}  // namespace

TEST_CASE("a Linear weight's gradient is written into its home through weight.t(), and nothing else of the buffer") {
  HomedWeight homed({5, 7});
  for (const Shape& input_shape : {Shape{6, 7}, Shape{2, 3, 7}}) {  // addmm, and rows folded from [B, T, in]
    CAPTURE(shape_str(input_shape));
    homed.weight.set_grad(Tensor());
    const Tensor input = test::rand_input(input_shape).detach().to(DType::f32);
    const Tensor plain = homed.weight.detach().clone().requires_grad_();
    linear_loss(input, plain).backward();
    const std::vector<double> around_before = homed.around_home();
    linear_loss(input, homed.weight).backward();
    CHECK(homed.weight.grad().is_same(homed.home));
    CHECK(test::values(homed.weight.grad()) == test::values(plain.grad()));
    CHECK(homed.around_home() == around_before);
  }
}

TEST_CASE("a homed weight multiplied directly, through .t() twice, and both, gets the sum of its uses") {
  const Tensor a = test::rand_input({6, 4}).detach().to(DType::f32);
  const Tensor b = test::rand_input({3, 4}).detach().to(DType::f32);
  Generator generator(5);
  const Tensor mix = randn({3, 4}, {}, &generator);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> uses = {
      {"mm(a, weight)",
       [&](const Tensor& w) {
         return (mm(a, w) * randn({6, 4}, {}, &generator)).sum();
       }},
      {"two Linears", [&](const Tensor& w) { return linear_loss(a, w) + linear_loss(b, w); }},
      {"mm and a Linear (tied)", [&](const Tensor& w) { return (mm(b, w) * mix).sum() + linear_loss(a, w); }},
  };
  for (const auto& [name, loss_of] : uses) {
    CAPTURE(name);
    HomedWeight homed({4, 4});
    const Tensor plain = homed.weight.detach().clone().requires_grad_();
    generator.manual_seed(5);
    loss_of(plain).backward();
    generator.manual_seed(5);
    loss_of(homed.weight).backward();
    CHECK(test::max_abs_diff(homed.weight.grad(), plain.grad()) < 1e-5);
    if (std::string(name) == "mm(a, weight)") CHECK(homed.weight.grad().is_same(homed.home));
  }
}

TEST_CASE("a home of another dtype or shape is not used, and outside backward gradient_output makes a new tensor") {
  Tensor weight = test::rand_input({4, 2, 3, 3}).detach().to(DType::f32).requires_grad_();
  const Tensor wrong_dtype = zeros({4, 2, 3, 3}, {DType::f64});
  autograd::ensure_meta(weight).grad_home = wrong_dtype;
  const Tensor input = test::rand_input({1, 2, 4, 4}).detach().to(DType::f32);
  conv_loss(input, weight).backward();
  CHECK_FALSE(weight.grad().is_same(wrong_dtype));
  CHECK(test::values(wrong_dtype) == std::vector<double>(wrong_dtype.numel(), 0.0));

  const Tensor fresh = autograd::gradient_output(1, {4, 2, 3, 3}, weight);
  CHECK(fresh.sizes() == Shape{4, 2, 3, 3});
  CHECK(fresh.dtype() == DType::f32);
}
