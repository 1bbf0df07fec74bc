// Anomaly mode: the first op (forward) or backward node (backward) that produces inf/NaN is named
// with its forward op, input shapes and module path; with the mode off nothing changes.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/anomaly_mode.h"
#include "autograd/node.h"
#include "helpers.h"

using namespace sg;

namespace {

constexpr int64_t B = 4, C = 8;  // batch, channels

// sqrt(relu(x) + 1) is safe everywhere; sqrt(relu(x)) has an infinite derivative where relu
// clips to 0 (finite forward, inf backward); log(relu(x)) is -inf there already in forward.
enum class Root { safe, sqrt_at_zero, log_at_zero };

class RootActivation : public nn::Module {
public:
  explicit RootActivation(Root root) : root_(root) {}
  Tensor forward(const Tensor& x) override {
    switch (root_) {
      case Root::safe: return sqrt(relu(x) + 1.0);
      case Root::sqrt_at_zero: return sqrt(relu(x));
      case Root::log_at_zero: return log(relu(x));
    }
    SG_FAIL("RootActivation: unknown root");
  }
  std::string type_name() const override { return "RootActivation"; }

private:
  Root root_;
};

class Block : public nn::Module {
public:
  explicit Block(Root root) {
    proj = register_module("proj", std::make_shared<nn::Linear>(C, C, true, &test::rng()));
    act = register_module("act", std::make_shared<RootActivation>(root));
  }
  Tensor forward(const Tensor& x) override { return (*act)((*proj)(x)); }
  std::string type_name() const override { return "Block"; }
  std::shared_ptr<nn::Linear> proj;
  std::shared_ptr<RootActivation> act;
};

// blocks.0 is always safe; blocks.1 carries the planted bug.
class Net : public nn::Module {
public:
  explicit Net(Root second_block) {
    blocks =
        register_module("blocks", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                      std::make_shared<Block>(Root::safe), std::make_shared<Block>(second_block)}));
    head = register_module("head", std::make_shared<nn::Linear>(C, 1, true, &test::rng()));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*blocks)(x)); }
  std::string type_name() const override { return "Net"; }
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::Linear> head;
};

Tensor batch() { return randn({B, C}, {DType::f32}, &test::rng()); }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("anomaly mode is off by default") {
  CHECK_FALSE(autograd::is_anomaly_enabled());
  CHECK_FALSE(autograd::is_anomaly_check_nan_enabled());
}

TEST_CASE("anomaly mode names the backward node, forward op, shapes and module of the first inf gradient") {
  Net net(Root::sqrt_at_zero);
  const Tensor x = batch();
  autograd::DetectAnomalyGuard anomaly;
  const Tensor loss = net(x).sum();  // finite: sqrt(0) = 0
  const std::string message = error_of([&] { loss.backward(); });
  INFO(message);
  CHECK(message.find("SqrtBackward returned") != std::string::npos);
  CHECK(message.find("in its 0th output") != std::string::npos);
  CHECK(message.find("forward op Sqrt on inputs (f32[4, 8])") != std::string::npos);
  CHECK(message.find("in module blocks.1.act (RootActivation)") != std::string::npos);
}

TEST_CASE("anomaly mode fails at the forward op that makes inf from finite inputs") {
  Net net(Root::log_at_zero);
  const Tensor x = batch();
  {
    autograd::DetectAnomalyGuard anomaly;
    const std::string message = error_of([&] { net(x); });
    INFO(message);
    CHECK(message.find("forward op Log produced inf values from finite inputs (f32[4, 8])") != std::string::npos);
    CHECK(message.find("in module blocks.1.act (RootActivation)") != std::string::npos);
    CHECK(autograd::current_module_path().empty());  // the failed forward unwound its modules
  }
  autograd::DetectAnomalyGuard record_only(/*check_nan=*/false);
  CHECK_NOTHROW(net(x));
}

TEST_CASE("a -inf attention mask written by masked_fill is not an anomaly") {
  const Tensor scores = randn({B, C}, {DType::f32}, &test::rng()).requires_grad_();
  const Tensor mask = gt(randn({B, C}, {DType::f32}, &test::rng()), 0.5);
  mask.narrow(1, 0, 1).fill_(0.0);  // every row keeps a score, so softmax stays finite
  autograd::DetectAnomalyGuard anomaly;
  // The -inf enters as an input (the filled value), so no op makes it from finite inputs.
  const Tensor attention = softmax(masked_fill(scores, mask, -std::numeric_limits<double>::infinity()), 1);
  CHECK_NOTHROW((attention * randn({B, C}, {DType::f32}, &test::rng())).sum().backward());
  CHECK(std::isfinite(scores.grad().abs().sum().item()));
}

TEST_CASE("anomaly mode records each node's forward op, inputs and module") {
  Net net(Root::safe);
  const Tensor x = batch().requires_grad_();
  autograd::DetectAnomalyGuard anomaly;
  const Tensor out = net(x);
  const autograd::ForwardRecord* head = autograd::meta_of(out)->grad_fn->forward_record();
  REQUIRE(head != nullptr);
  INFO(head->inputs);
  CHECK(head->module == "head (Linear)");
  CHECK(head->inputs.find("f32[4, 8]") != std::string::npos);

  const Tensor y = exp(x);
  const autograd::ForwardRecord* root = autograd::meta_of(y)->grad_fn->forward_record();
  REQUIRE(root != nullptr);
  CHECK(root->op == "Exp");
  CHECK(root->inputs == "f32[4, 8]");
  CHECK(root->module.empty());  // called outside any module
}

TEST_CASE("a node recorded outside anomaly mode is named without its origin") {
  const Tensor x = randn({B, C}, {DType::f32}, &test::rng()).requires_grad_();
  const Tensor loss = sqrt(relu(x)).sum();
  autograd::DetectAnomalyGuard anomaly;
  const std::string message = error_of([&] { loss.backward(); });
  INFO(message);
  CHECK(message.find("SqrtBackward returned") != std::string::npos);
  CHECK(message.find("created outside anomaly mode") != std::string::npos);
}

TEST_CASE("a clean run in anomaly mode gives the same gradients as with the mode off") {
  Net net(Root::safe);
  const Tensor x = batch();
  net(x).sum().backward();
  const nn::NamedTensors plain = net.named_parameters();
  std::vector<Tensor> plain_grads;
  for (const auto& [name, p] : plain) plain_grads.push_back(p.grad().clone());
  net.zero_grad();
  {
    autograd::DetectAnomalyGuard anomaly;
    net(x).sum().backward();
  }
  const nn::NamedTensors checked = net.named_parameters();
  for (size_t i = 0; i < checked.size(); ++i) {
    INFO(checked[i].first);
    CHECK(test::max_abs_diff(checked[i].second.grad(), plain_grads[i]) == 0.0);  // same kernels, same order
  }
}

TEST_CASE("DetectAnomalyGuard restores the previous mode, also when an exception leaves its scope") {
  autograd::set_detect_anomaly(true, /*check_nan=*/false);
  {
    autograd::DetectAnomalyGuard anomaly;
    CHECK(autograd::is_anomaly_check_nan_enabled());
  }
  CHECK(autograd::is_anomaly_enabled());
  CHECK_FALSE(autograd::is_anomaly_check_nan_enabled());
  autograd::set_detect_anomaly(false);
  try {
    autograd::DetectAnomalyGuard anomaly;
    throw std::runtime_error("leaving the scope");
  } catch (const std::runtime_error&) {}
  CHECK_FALSE(autograd::is_anomaly_enabled());
}
