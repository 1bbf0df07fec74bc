// nn::Module's bookkeeping: names, traversal, modes, conversion and state dicts.
#include <algorithm>

#include "helpers.h"
#include "nn/module.h"

using namespace sg;

namespace {
// A minimal layer: y = x * scale + shift, with a running count buffer.
struct Affine : nn::Module {
  Tensor scale, shift, calls;
  explicit Affine(int64_t n) {
    scale = register_parameter("scale", randn({n}, {}, &test::rng()));
    shift = register_parameter("shift", randn({n}, {}, &test::rng()));
    calls = register_buffer("calls", zeros({1}));
  }
  Tensor forward(const Tensor& x) override { return x * scale + shift; }
  std::string type_name() const override { return "Affine"; }
};

struct Block : nn::Module {
  std::shared_ptr<Affine> first, second;
  Block() {
    first = register_module("first", std::make_shared<Affine>(3));
    second = register_module("second", std::make_shared<Affine>(3));
  }
  Tensor forward(const Tensor& x) override { return (*second)((*first)(x)); }
  std::string type_name() const override { return "Block"; }
};

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}
}  // namespace

TEST_CASE("named_parameters gives dotted names in registration order") {
  Block block;
  CHECK(names_of(block.named_parameters()) ==
        std::vector<std::string>{"first.scale", "first.shift", "second.scale", "second.shift"});
  CHECK(names_of(block.named_buffers()) == std::vector<std::string>{"first.calls", "second.calls"});
  CHECK(block.named_parameters(/*recurse=*/false).empty());
  for (const Tensor& p : block.parameters()) CHECK(p.requires_grad());
}

TEST_CASE("named_modules lists every descendant with its path") {
  auto block = std::make_shared<Block>();
  auto modules = block->named_modules();
  REQUIRE(modules.size() == 3);
  CHECK(modules[0].first.empty());
  CHECK(modules[1].first == "first");
  CHECK(modules[2].second.get() == block->second.get());
}

TEST_CASE("named_modules works on a module no shared_ptr owns (on the stack)") {
  Block block;
  auto modules = block.named_modules();
  REQUIRE(modules.size() == 3);
  CHECK(modules[0].second.get() == &block);
  CHECK(modules[0].second.use_count() == 0);  // lists the module without owning it
  CHECK(modules[2].second.get() == block.second.get());
}

TEST_CASE("a name can be registered only once") {
  struct Twice : nn::Module {
    Twice() {
      register_parameter("w", zeros({1}));
      register_buffer("w", zeros({1}));
    }
  };
  CHECK_THROWS_WITH_AS(Twice(), doctest::Contains("already registered"), Error);
}

TEST_CASE("train and eval propagate to children") {
  Block block;
  block.eval();
  CHECK_FALSE(block.first->is_training());
  block.train();
  CHECK(block.second->is_training());
}

TEST_CASE("zero_grad clears or zeroes the gradients") {
  Block block;
  block(randn({2, 3}, {}, &test::rng())).sum().backward();
  CHECK(block.first->scale.grad().defined());
  block.zero_grad(/*set_to_none=*/false);
  CHECK(test::values(block.first->scale.grad()) == std::vector<double>{0, 0, 0});
  block.zero_grad();
  CHECK_FALSE(block.first->scale.grad().defined());
}

TEST_CASE("to(dtype) converts parameters in place so the layer's own handles follow") {
  Block block;
  const auto before = test::values(block.first->scale);
  block.to(DType::f64);
  CHECK(block.first->scale.dtype() == DType::f64);
  CHECK(block.parameters()[0].dtype() == DType::f64);
  CHECK(test::values(block.first->scale) == before);
  CHECK(block.first->scale.requires_grad());
  CHECK(block(randn({2, 3}, {DType::f64}, &test::rng())).dtype() == DType::f64);
}

TEST_CASE("state_dict round-trips into a fresh model") {
  Block source, target;
  target.load_state_dict(source.state_dict());
  for (const auto& [name, tensor] : source.state_dict())
    CHECK(test::values(target.state_dict().at(name)) == test::values(tensor));
}

TEST_CASE("load_state_dict lists missing, unexpected and mis-shaped keys") {
  Block model;
  auto state = model.state_dict();
  state.erase("first.shift");
  state["first.bogus"] = zeros({1});
  state["second.scale"] = zeros({4});
  try {
    model.load_state_dict(state);
    FAIL("expected an error");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("missing keys: first.shift") != std::string::npos);
    CHECK(message.find("unexpected keys: first.bogus") != std::string::npos);
    CHECK(message.find("second.scale (checkpoint [4], model [3])") != std::string::npos);
  }
}

TEST_CASE("non-strict loading returns missing and unexpected keys but still refuses bad shapes") {
  Block model;
  auto state = model.state_dict();
  state.erase("first.shift");
  state["extra"] = zeros({1});
  auto result = model.load_state_dict(state, /*strict=*/false);
  CHECK(result.missing_keys == std::vector<std::string>{"first.shift"});
  CHECK(result.unexpected_keys == std::vector<std::string>{"extra"});
  state["first.scale"] = zeros({5});
  CHECK_THROWS_AS(model.load_state_dict(state, false), Error);
}

TEST_CASE("load_state_dict refuses a tensor of another dtype, naming the key and both dtypes") {
  Block model;
  const auto before = test::values(model.first->scale);
  auto state = model.state_dict();
  state["first.scale"] = state.at("first.scale").to(DType::i32);  // what a relabelled file holds
  state["second.calls"] = state.at("second.calls").to(DType::f64);
  try {
    model.load_state_dict(state, /*strict=*/false);
    FAIL("expected an error");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("mis-typed keys: first.scale (checkpoint i32, model f32), second.calls (checkpoint f64, "
                       "model f32)") != std::string::npos);
  }
  CHECK(test::values(model.first->scale) == before);
}

TEST_CASE("a failed load leaves the model unchanged") {
  Block model;
  const auto before = test::values(model.first->scale);
  auto state = Block().state_dict();
  state["second.scale"] = zeros({4});
  CHECK_THROWS_AS(model.load_state_dict(state), Error);
  CHECK(test::values(model.first->scale) == before);
}

TEST_CASE("str prints the module tree") {
  Block block;
  CHECK(block.str() == "Block(\n  (first): Affine()\n  (second): Affine()\n)");
}

TEST_CASE("a non-persistent buffer is a buffer, but state_dict leaves it out and strict loading does not expect it") {
  // A layer with a mask it rebuilds at construction, as minGPT's causal attention does.
  struct Masked : nn::Module {
    Tensor mask;
    Masked() {
      register_parameter("weight", zeros({2}));
      mask = register_buffer("mask", ones({2, 2}).tril(), /*persistent=*/false);
      register_buffer("count", zeros({1}));
    }
  };
  struct Outer : nn::Module {
    Outer() { register_module("inner", std::make_shared<Masked>()); }
  };
  Outer model;
  CHECK(names_of(model.named_buffers()) == std::vector<std::string>{"inner.mask", "inner.count"});
  CHECK(model.buffers().size() == 2);
  model.to(DType::f64);  // converted with the other buffers
  CHECK(model.buffers()[0].dtype() == DType::f64);

  const nn::StateDict state = model.state_dict();
  CHECK(state.count("inner.mask") == 0);
  CHECK(state.count("inner.count") == 1);
  CHECK(state.count("inner.weight") == 1);
  Outer fresh;
  fresh.to(DType::f64);
  const auto result = fresh.load_state_dict(state);  // strict: nothing missing
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  auto with_mask = state;
  with_mask["inner.mask"] = zeros({2, 2}, {DType::f64});
  CHECK_THROWS_WITH_AS(fresh.load_state_dict(with_mask), doctest::Contains("unexpected keys: inner.mask"), Error);
}
