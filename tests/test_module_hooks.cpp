// nn::Module's forward pre-hooks, forward hooks and full backward hooks (PyTorch's semantics).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "helpers.h"

using namespace sg;

namespace {

// y = fc(x) + x: the input reaches the output two ways, so the module's grad_input is a sum.
class Residual : public nn::Module {
public:
  explicit Residual(int64_t features)
      : fc(register_module("fc", std::make_shared<nn::Linear>(features, features, true, &test::rng()))) {}
  Tensor forward(const Tensor& input) override { return (*fc)(input) + input; }
  std::string type_name() const override { return "Residual"; }

  std::shared_ptr<nn::Linear> fc;
};

std::shared_ptr<nn::Linear> f64_linear(int64_t in, int64_t out) {
  auto linear = std::make_shared<nn::Linear>(in, out, true, &test::rng());
  linear->to(DType::f64);
  return linear;
}

}  // namespace

TEST_CASE("forward pre-hooks and forward hooks run in registration order around forward") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  std::vector<std::string> calls;
  Tensor hook_input, hook_output;
  linear->register_forward_pre_hook([&](nn::Module& module, const Tensor& input) -> std::optional<Tensor> {
    calls.push_back("pre 1 on " + module.type_name());
    CHECK(input.is_same(x));
    return std::nullopt;
  });
  linear->register_forward_pre_hook([&](nn::Module&, const Tensor&) -> std::optional<Tensor> {
    calls.push_back("pre 2");
    return std::nullopt;
  });
  linear->register_forward_hook([&](nn::Module&, const Tensor& input, const Tensor& output) -> std::optional<Tensor> {
    calls.push_back("forward 1");
    hook_input = input;
    hook_output = output;
    return std::nullopt;
  });
  linear->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) -> std::optional<Tensor> {
    calls.push_back("forward 2");
    return std::nullopt;
  });
  const Tensor y = (*linear)(x);
  CHECK(calls == std::vector<std::string>{"pre 1 on Linear", "pre 2", "forward 1", "forward 2"});
  CHECK(hook_input.is_same(x));
  CHECK(hook_output.is_same(y));
  // forward() called directly runs no hooks
  calls.clear();
  linear->forward(x);
  CHECK(calls.empty());
}

TEST_CASE("a pre-hook's replacement input reaches the next pre-hook, forward and the forward hooks") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  Tensor seen_by_second_pre_hook, seen_by_forward_hook;
  linear->register_forward_pre_hook(
      [](nn::Module&, const Tensor& input) -> std::optional<Tensor> { return input * 2.0; });
  linear->register_forward_pre_hook([&](nn::Module&, const Tensor& input) -> std::optional<Tensor> {
    seen_by_second_pre_hook = input;
    return std::nullopt;
  });
  linear->register_forward_hook([&](nn::Module&, const Tensor& input, const Tensor&) -> std::optional<Tensor> {
    seen_by_forward_hook = input;
    return std::nullopt;
  });
  const Tensor y = (*linear)(x);
  CHECK(test::max_abs_diff(seen_by_second_pre_hook, x * 2.0) == 0.0);
  CHECK(seen_by_forward_hook.is_same(seen_by_second_pre_hook));
  CHECK(test::max_abs_diff(y, linear->forward(x * 2.0)) == 0.0);
}

TEST_CASE("a forward hook's replacement output reaches the next forward hook and the caller") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  Tensor seen_by_second_hook;
  linear->register_forward_hook(
      [](nn::Module&, const Tensor&, const Tensor& output) -> std::optional<Tensor> { return output.relu(); });
  linear->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& output) -> std::optional<Tensor> {
    seen_by_second_hook = output;
    return std::nullopt;
  });
  const Tensor y = (*linear)(x);
  CHECK(test::max_abs_diff(y, linear->forward(x).relu()) == 0.0);
  CHECK(seen_by_second_hook.is_same(y));
}

TEST_CASE("a removed hook no longer runs, and removing again or after the module is gone does nothing") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  int first_calls = 0, second_calls = 0;
  nn::RemovableHandle first = linear->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) {
    ++first_calls;
    return std::optional<Tensor>();
  });
  nn::RemovableHandle second = linear->register_forward_pre_hook([&](nn::Module&, const Tensor&) {
    ++second_calls;
    return std::optional<Tensor>();
  });
  (*linear)(x);
  first.remove();
  (*linear)(x);
  CHECK(first_calls == 1);
  CHECK(second_calls == 2);
  first.remove();
  linear.reset();
  second.remove();
}

TEST_CASE("a child's hooks run when Sequential calls it") {
  auto first = f64_linear(4, 3), second = f64_linear(3, 2);
  nn::Sequential model({first, second});
  const Tensor x = test::rand_input({2, 4});
  Tensor activation;
  first->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& output) {
    activation = output;
    return std::optional<Tensor>();
  });
  const Tensor y = model(x);
  REQUIRE(activation.defined());
  CHECK(test::max_abs_diff(activation, first->forward(x)) == 0.0);
  CHECK(test::max_abs_diff(y, second->forward(activation)) == 0.0);
}

TEST_CASE("a full backward hook gets the gradients of the module's output and of its whole input") {
  Residual block(4);
  block.to(DType::f64);
  const Tensor x = test::rand_input({3, 4});
  const Tensor upstream = test::rand_input({3, 4}).detach();  // the loss is sum(y * upstream)
  TensorList grad_input, grad_output;
  int calls = 0;
  block.register_full_backward_hook([&](nn::Module& module, const TensorList& gi, const TensorList& go) {
    CHECK(module.type_name() == "Residual");
    grad_input = gi;
    grad_output = go;
    ++calls;
    return std::optional<TensorList>();
  });
  (block(x) * upstream).sum().backward();
  CHECK(calls == 1);
  REQUIRE(grad_output.size() == 1);
  REQUIRE(grad_input.size() == 1);
  // y = x W^T + b + x, so dL/dy = upstream and dL/dx = upstream W + upstream (exact in f64 up to
  // the summation order of one matmul)
  CHECK(test::max_abs_diff(grad_output[0], upstream) == 0.0);
  const Tensor expected_grad_input = upstream.matmul(block.fc->weight.detach()) + upstream;
  CHECK(test::max_abs_diff(grad_input[0], expected_grad_input) < 1e-12);
  CHECK(test::max_abs_diff(x.grad(), expected_grad_input) < 1e-12);
  CHECK(block.fc->weight.grad().defined());
}

TEST_CASE("a full backward hook's replacement grad_input flows on, and hooks chain in order") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  const Tensor upstream = test::rand_input({2, 3}).detach();
  Tensor seen_by_second_hook;
  linear->register_full_backward_hook([](nn::Module&, const TensorList& grad_input, const TensorList&) {
    return std::optional<TensorList>(TensorList{grad_input[0] * 0.5});
  });
  linear->register_full_backward_hook([&](nn::Module&, const TensorList& grad_input, const TensorList&) {
    seen_by_second_hook = grad_input[0];
    return std::optional<TensorList>();
  });
  ((*linear)(x)*upstream).sum().backward();
  const Tensor expected = upstream.matmul(linear->weight.detach()) * 0.5;  // dL/dx = upstream W, halved
  CHECK(test::max_abs_diff(seen_by_second_hook, expected) < 1e-12);
  CHECK(test::max_abs_diff(x.grad(), expected) < 1e-12);
  // the parameters' gradients are the module's own business: the hook does not touch them
  CHECK(test::max_abs_diff(linear->bias.grad(), upstream.sum({0})) < 1e-12);
}

TEST_CASE("a full backward hook on a module whose input needs no gradient gets an undefined grad_input") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4}).detach();
  const Tensor upstream = test::rand_input({2, 3}).detach();
  int calls = 0;
  linear->register_full_backward_hook([&](nn::Module&, const TensorList& grad_input, const TensorList& grad_output) {
    ++calls;
    REQUIRE(grad_input.size() == 1);
    CHECK(!grad_input[0].defined());
    CHECK(test::max_abs_diff(grad_output[0], upstream) == 0.0);
    return std::optional<TensorList>();
  });
  ((*linear)(x)*upstream).sum().backward();
  CHECK(calls == 1);
  CHECK(linear->weight.grad().defined());
}

TEST_CASE("a full backward hook returning the wrong number of gradients is refused, naming the module") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  linear->register_full_backward_hook([](nn::Module&, const TensorList& grad_input, const TensorList&) {
    return std::optional<TensorList>(TensorList{grad_input[0], grad_input[0]});
  });
  CHECK_THROWS_WITH_AS((*linear)(x).sum().backward(),
                       doctest::Contains("Linear: a full backward hook returned 2 grad_input tensors, but the module "
                                         "has 1 input"),
                       Error);
}

TEST_CASE("no backward hook is set up when grad mode is off") {
  auto linear = f64_linear(4, 3);
  const Tensor x = test::rand_input({2, 4});
  linear->register_full_backward_hook(
      [](nn::Module&, const TensorList&, const TensorList&) { return std::optional<TensorList>(); });
  NoGradGuard no_grad;
  const Tensor y = (*linear)(x);
  CHECK(!y.requires_grad());
}
