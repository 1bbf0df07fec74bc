// Autocast: the policy table against docs/amp.md and against what every op does; output and
// gradient dtypes inside and outside a region; nesting; the weight cast cache; real 16-bit rounding.
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "amp/autocast.h"
#include "autograd/autocast_policy.h"
#include "helpers.h"

using namespace sg;
using autograd::AutocastOp;
using autograd::CastPolicy;
namespace F = sg::nn::functional;

namespace {

Tensor random(const Shape& shape, DType dtype, double low = -1.0, double high = 1.0) {
  return (rand(shape, {}, &test::rng()) * (high - low) + low).to(dtype);
}

// Runs `op` once on small random inputs: `first` is the dtype of the main input (and of every
// other floating input), except that the second value input of a multi-input op gets `second`.
Tensor run_op(AutocastOp op, DType first, DType second) {
  const Tensor x = random({4, 6}, first), y = random({4, 6}, second), positive = random({4, 6}, first, 0.5, 2.0);
  const Tensor labels = tensor(std::vector<int64_t>{0, 5, 2, 3});
  switch (op) {
    case AutocastOp::matmul: return matmul(x, random({6, 3}, second));
    case AutocastOp::mm: return mm(x, random({6, 3}, second));
    case AutocastOp::bmm: return bmm(random({2, 4, 6}, first), random({2, 6, 3}, second));
    case AutocastOp::addmm: return addmm(random({3}, second), x, random({6, 3}, second));
    case AutocastOp::baddbmm: return baddbmm(random({1, 4, 3}, second), x.unsqueeze(0), random({1, 6, 3}, second));
    case AutocastOp::linear: return linear(x, random({3, 6}, second), random({3}, second));
    case AutocastOp::conv2d:
      return conv2d(random({2, 3, 6, 6}, first), random({4, 3, 3, 3}, second), random({4}, second));
    case AutocastOp::scaled_dot_product_attention:
      return scaled_dot_product_attention(x.unsqueeze(0), random({1, 5, 6}, second), random({1, 5, 3}, second));
    case AutocastOp::exp: return exp(x);
    case AutocastOp::log: return log(positive);
    case AutocastOp::pow: return pow(positive, 1.5);
    case AutocastOp::rsqrt: return rsqrt(positive);
    case AutocastOp::sum: return sum(x);
    case AutocastOp::mean: return mean(x, {1});
    case AutocastOp::var: return var(x, {1});
    case AutocastOp::norm: return norm(x);
    case AutocastOp::softmax: return softmax(x, 1);
    case AutocastOp::log_softmax: return log_softmax(x, 1);
    case AutocastOp::logsumexp: return logsumexp(x, {1});
    case AutocastOp::layer_norm: return layer_norm(x, {6}, random({6}, first), random({6}, first));
    case AutocastOp::batch_norm:
      return batch_norm(x, random({6}, first), random({6}, first), Tensor(), Tensor(), /*training=*/true);
    case AutocastOp::cross_entropy: return F::cross_entropy(x, labels);
    case AutocastOp::nll_loss: return F::nll_loss(x, labels);
    case AutocastOp::mse_loss: return F::mse_loss(x, random({4, 6}, first));
    case AutocastOp::add: return add(x, y);
    case AutocastOp::sub: return sub(x, y);
    case AutocastOp::mul: return mul(x, y);
    case AutocastOp::div: return div(x, y);
    case AutocastOp::maximum: return maximum(x, y);
    case AutocastOp::minimum: return minimum(x, y);
    case AutocastOp::where: return where(gt(x, 0.0), x, y);
    case AutocastOp::cat: return cat({x, y}, 0);
    case AutocastOp::stack: return stack({x, y}, 0);
    case AutocastOp::scatter_add:
      return scatter_add(x, 0, tensor(std::vector<int64_t>{1, 0, 3, 2, 0, 1}, {1, 6}), random({1, 6}, second));
  }
  throw Error("run_op: an op without a case");
}

// The (op, policy) rows of the markdown table in docs/amp.md.
std::map<std::string, std::string> documented_rules() {
  std::ifstream doc(std::string(SG_SOURCE_DIR) + "/docs/amp.md");
  REQUIRE(doc.good());
  const std::regex row(R"(^\| `(\w+)` \| (\w+) \|)");
  std::map<std::string, std::string> rules;
  std::smatch match;
  for (std::string line; std::getline(doc, line);)
    if (std::regex_search(line, match, row)) rules[match[1]] = match[2];
  return rules;
}

}  // namespace

TEST_CASE("the policy table in docs/amp.md lists exactly the code's autocast rules") {
  std::map<std::string, std::string> in_code;
  for (const auto& rule : autograd::kAutocastRules)
    in_code[std::string(rule.name)] = std::string(autograd::cast_policy_name(rule.policy));
  CHECK(documented_rules() == in_code);
}

TEST_CASE("inside a region every op's output has the dtype its autocast rule promises") {
  for (const DType low : {DType::f16, DType::bf16}) {
    for (const auto& rule : autograd::kAutocastRules) {
      INFO("op ", std::string(rule.name), " in a ", low, " region");
      amp::AutocastGuard autocast(low);
      switch (rule.policy) {
        case CastPolicy::lower_precision: CHECK(run_op(rule.op, DType::f32, DType::f32).dtype() == low); break;
        case CastPolicy::fp32: CHECK(run_op(rule.op, low, low).dtype() == DType::f32); break;
        case CastPolicy::promote: CHECK(run_op(rule.op, low, DType::f32).dtype() == DType::f32); break;
      }
    }
  }
}

TEST_CASE("outside a region the ops keep their input dtypes") {
  for (const auto& rule : autograd::kAutocastRules) {
    INFO("op ", std::string(rule.name));
    if (rule.policy == CastPolicy::lower_precision)
      CHECK(run_op(rule.op, DType::f32, DType::f32).dtype() == DType::f32);
    if (rule.policy == CastPolicy::fp32) CHECK(run_op(rule.op, DType::f16, DType::f16).dtype() == DType::f16);
  }
  CHECK_THROWS_WITH_AS(run_op(AutocastOp::scatter_add, DType::f16, DType::f32),
                       doctest::Contains("src is f32 but the input is f16"), Error);
}

TEST_CASE("f64 and integer tensors are never cast") {
  amp::AutocastGuard autocast(DType::f16);
  CHECK(matmul(random({2, 3}, DType::f64), random({3, 2}, DType::f64)).dtype() == DType::f64);
  CHECK(sum(random({2, 3}, DType::f64)).dtype() == DType::f64);
  CHECK(matmul(arange(6).reshape({2, 3}), arange(6).reshape({3, 2})).dtype() == DType::i64);
}

TEST_CASE("a low precision product is the 16-bit rounding of the f32 product of 16-bit inputs") {
  // What a GPU does: 16-bit operands, f32 accumulation, one rounding of the result.
  for (const DType low : {DType::f16, DType::bf16}) {
    INFO(low);
    const Tensor a = random({5, 37}, DType::f32), b = random({37, 4}, DType::f32);
    const Tensor x = random({2, 3, 7, 7}, DType::f32), w = random({4, 3, 3, 3}, DType::f32),
                 bias = random({4}, DType::f32);
    const auto widened = [low](const Tensor& t) { return t.to(low).to(DType::f32); };
    Tensor product, convolution;
    {
      amp::AutocastGuard autocast(low);
      product = matmul(a, b);
      convolution = conv2d(x, w, bias, 1, 1);
    }
    CHECK(test::values(product) == test::values(matmul(widened(a), widened(b)).to(low)));
    CHECK(test::values(convolution) == test::values(conv2d(widened(x), widened(w), widened(bias), 1, 1).to(low)));
    // And the rounding is real: the 16-bit result differs from the f32 product somewhere.
    CHECK(test::max_abs_diff(product.to(DType::f32), matmul(a, b)) > 0);
  }
}

TEST_CASE("gradients reach every leaf in its own dtype, with the values of the explicit casts") {
  nn::Linear layer(6, 3, true, &test::rng());
  const Tensor x = random({4, 6}, DType::f32).requires_grad_();
  const Tensor shift = random({4, 3}, DType::f16).requires_grad_();  // a 16-bit leaf
  const Tensor target = random({4, 3}, DType::f32);
  Tensor loss;
  {
    amp::AutocastGuard autocast(DType::f16);
    const Tensor out = layer(x);
    CHECK(out.dtype() == DType::f16);
    loss = F::mse_loss(out + shift, target);
    CHECK(loss.dtype() == DType::f32);
  }
  loss.backward();
  CHECK(layer.weight.grad().dtype() == DType::f32);
  CHECK(layer.bias.grad().dtype() == DType::f32);
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(shift.grad().dtype() == DType::f16);

  // The same graph with the casts written out by hand gives bit-identical gradients.
  const Tensor w = layer.weight.detach().requires_grad_(), b = layer.bias.detach().requires_grad_();
  const Tensor x2 = x.detach().requires_grad_(), shift2 = shift.detach().requires_grad_();
  const Tensor out = addmm(b.to(DType::f16), x2.to(DType::f16), w.to(DType::f16).t());
  F::mse_loss((out + shift2).to(DType::f32), target).backward();
  CHECK(test::values(layer.weight.grad()) == test::values(w.grad()));
  CHECK(test::values(layer.bias.grad()) == test::values(b.grad()));
  CHECK(test::values(x.grad()) == test::values(x2.grad()));
  CHECK(test::values(shift.grad()) == test::values(shift2.grad()));
}

TEST_CASE("backward called inside a region does not autocast") {
  const Tensor x = random({3, 5}, DType::f16).requires_grad_();
  const Tensor w = random({5, 5}, DType::f32).requires_grad_();
  amp::AutocastGuard autocast(DType::f16);
  const Tensor y = relu(matmul(x, w));  // f16
  y.backward(ones({3, 5}, {DType::f16}));
  CHECK(x.grad().dtype() == DType::f16);
  CHECK(w.grad().dtype() == DType::f32);
  // d/dw sum(relu(x w)) = x^T (x w > 0), computed in f16 and carried back to f32
  const Tensor x16 = x.detach(), w16 = w.detach().to(DType::f16);
  Tensor expected;
  {
    amp::AutocastGuard off(DType::f16, false);
    expected = matmul(x16.t(), gt(matmul(x16, w16), 0.0).to(DType::f16)).to(DType::f32);
  }
  CHECK(test::values(w.grad()) == test::values(expected));
}

TEST_CASE("the cast's backward converts the gradient back to the source dtype") {
  const Tensor x = random({7}, DType::f32).requires_grad_();
  const Tensor g = random({7}, DType::f16);
  x.to(DType::f16).backward(g);
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(test::values(x.grad()) == test::values(g));  // every f16 value is exact in f32

  // Finite differences through an f64 -> f32 -> f64 round trip: the function is linear, so only
  // the f32 rounding (~1e-7 relative, over a step of 1e-3) separates them; hence the tolerances.
  const Tensor scale = random({7}, DType::f32);
  CHECK_GRADCHECK([&](const TensorList& in) { return (in[0].to(DType::f32) * scale).to(DType::f64); },
                  {test::rand_input({7})}, GradcheckOptions{.eps = 1e-3, .atol = 1e-4, .rtol = 1e-3});
}

TEST_CASE("guards nest: an inner guard changes the dtype or switches autocast off, and the outer state returns") {
  const Tensor a = random({2, 3}, DType::f32), b = random({3, 2}, DType::f32);
  CHECK_FALSE(amp::is_autocast_enabled());
  {
    amp::AutocastGuard outer(DType::f16);
    CHECK(matmul(a, b).dtype() == DType::f16);
    {
      amp::AutocastGuard inner(DType::bf16);
      CHECK(matmul(a, b).dtype() == DType::bf16);
      {
        amp::AutocastGuard off(DType::f16, /*enabled=*/false);
        CHECK_FALSE(amp::is_autocast_enabled());
        CHECK(matmul(a, b).dtype() == DType::f32);
      }
      CHECK(amp::autocast_dtype() == DType::bf16);
    }
    CHECK(matmul(a, b).dtype() == DType::f16);
  }
  CHECK_FALSE(amp::is_autocast_enabled());
  CHECK(matmul(a, b).dtype() == DType::f32);
}

TEST_CASE("AutocastGuard refuses a dtype that is not f16 or bf16") {
  CHECK_THROWS_WITH_AS(amp::AutocastGuard(DType::f64), doctest::Contains("must be f16 or bf16, got f64"), Error);
  CHECK_FALSE(amp::is_autocast_enabled());
}

TEST_CASE("a weight is cast once per region and cast again after an in-place update") {
  nn::Linear layer(6, 3, true, &test::rng());
  const Tensor x = random({4, 6}, DType::f32);
  {
    amp::AutocastGuard autocast(DType::f16);
    const Tensor first = layer(x);
    CHECK(autograd::autocast_cache_size() == 2);  // weight and bias
    const Tensor cast = autograd::autocast_cast(layer.weight, DType::f16);
    const Tensor second = layer(x);
    CHECK(autograd::autocast_cache_size() == 2);
    CHECK(autograd::autocast_cast(layer.weight, DType::f16).is_same(cast));  // the same cast, reused
    CHECK(test::values(first) == test::values(second));
    {
      amp::AutocastGuard inner(DType::f16);  // a nested region shares the cache
      layer(x);
      CHECK(autograd::autocast_cast(layer.weight, DType::f16).is_same(cast));
    }
    CHECK(autograd::autocast_cache_size() == 2);  // an inner region's end does not clear it

    {
      NoGradGuard no_grad;
      layer.weight.mul_(0.5);  // what an optimizer step does: the version moves
    }
    const Tensor recast = autograd::autocast_cast(layer.weight, DType::f16);
    CHECK_FALSE(recast.is_same(cast));
    CHECK(test::values(recast) == test::values(layer.weight.to(DType::f16)));
    CHECK(autograd::autocast_cache_size() == 2);
  }
  CHECK(autograd::autocast_cache_size() == 0);  // the outermost region's end clears it
}

TEST_CASE("casts made without grad mode are not cached") {
  nn::Linear layer(6, 3, true, &test::rng());
  amp::AutocastGuard autocast(DType::f16);
  {
    NoGradGuard no_grad;
    layer(random({2, 6}, DType::f32));
  }
  CHECK(autograd::autocast_cache_size() == 0);
  const Tensor out = layer(random({2, 6}, DType::f32));
  CHECK(out.requires_grad());  // the forward with grad mode on got casts with history
}

TEST_CASE("two forward and backward passes in one region accumulate the same gradients as two regions") {
  nn::Linear layer(6, 3, true, &test::rng());
  const Tensor x = random({4, 6}, DType::f32);
  {
    amp::AutocastGuard autocast(DType::bf16);
    for (int i = 0; i < 2; ++i) sum(layer(x)).backward();  // the second pass re-casts: the first freed its graph
  }
  const Tensor in_one_region = layer.weight.grad().clone();
  layer.weight.set_grad(Tensor());
  for (int i = 0; i < 2; ++i) {
    amp::AutocastGuard autocast(DType::bf16);
    sum(layer(x)).backward();
  }
  CHECK(test::values(in_one_region) == test::values(layer.weight.grad()));
}
