// Activation checkpointing (autograd/checkpoint.h, nn/checkpointing.h, GPT's and ResNet's
// switches): the gradients equal a plain run's, dropout masks are replayed, activations are not
// kept, BatchNorm's running statistics move once per step.
#include <memory>

#include "autograd/engine.h"
#include "helpers.h"
#include "models/gpt.h"
#include "models/resnet.h"

using namespace sg;
using test::max_abs_diff;
using test::rand_input;

namespace {

std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 12, true, &test::rng()), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(12, 12, true, &test::rng()), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(12, 3, true, &test::rng())});
}

// The gradients of `model`'s parameters, in order, after `loss_of` has run backward; clears them.
TensorList take_parameter_grads(nn::Module& model) {
  TensorList grads;
  for (const Tensor& parameter : model.parameters()) grads.push_back(parameter.grad());
  model.zero_grad();
  return grads;
}

void check_same_grads(const TensorList& plain, const TensorList& checkpointed) {
  REQUIRE(plain.size() == checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("parameter ", i);
    REQUIRE(plain[i].defined());
    REQUIRE(checkpointed[i].defined());
    CHECK(max_abs_diff(plain[i], checkpointed[i]) == 0.0);
  }
}

}  // namespace

TEST_CASE("a checkpointed MLP gives the plain run's input and parameter gradients bit for bit") {
  auto mlp = make_mlp();
  Tensor x = rand_input({5, 6}).to(DType::f32).detach().requires_grad_();
  const Tensor weights = rand_input({5, 3}).to(DType::f32).detach();

  (mlp->forward(x) * weights).sum().backward();
  const Tensor plain_x_grad = x.grad().clone();
  const TensorList plain = take_parameter_grads(*mlp);
  x.mutable_grad() = Tensor();

  const Tensor out = autograd::checkpoint([&mlp](const Tensor& input) { return mlp->forward(input); }, x);
  CHECK(out.grad_fn()->name() == "CheckpointBackward");
  (out * weights).sum().backward();
  CHECK(max_abs_diff(plain_x_grad, x.grad()) == 0.0);
  check_same_grads(plain, take_parameter_grads(*mlp));
}

TEST_CASE("checkpoint passes float64 gradcheck for several inputs") {
  const Tensor x = rand_input({3, 4});
  const Tensor w = rand_input({4, 4});
  const Tensor b = rand_input({4});
  const auto fn = [](const TensorList& in) {
    return autograd::checkpoint(
        [](const TensorList& args) { return tanh(matmul(args[0], args[1]) + args[2]) * args[0]; }, in);
  };
  const GradcheckResult result = gradcheck(fn, {x, w, b});
  CHECK_MESSAGE(result.ok, result.message);
}

TEST_CASE("a checkpointed segment keeps none of its intermediate activations, a plain one does") {
  auto mlp = make_mlp();
  Tensor x = rand_input({5, 6}).to(DType::f32).detach().requires_grad_();
  std::weak_ptr<Storage> hidden;  // the first Linear's output, which the GELU's backward needs
  const auto fn = [&](const Tensor& input) {
    const Tensor h = (*(*mlp)[0])(input);
    hidden = h.storage();
    Tensor y = h;
    for (size_t i = 1; i < mlp->size(); ++i) y = (*(*mlp)[i])(y);
    return y;
  };
  const Tensor plain = fn(x);
  CHECK_FALSE(hidden.expired());  // saved by the graph until backward

  const Tensor checkpointed = autograd::checkpoint(fn, x);
  CHECK(hidden.expired());  // gone as soon as the forward returned
  checkpointed.sum().backward();
  CHECK(x.grad().defined());
}

TEST_CASE("checkpoint replays the dropout masks, and the caller's generator state comes back after backward") {
  Tensor x = rand_input({64}).to(DType::f32).detach().requires_grad_();
  Generator generator(7);
  const auto fn = [&generator](const Tensor& input) {
    return nn::functional::dropout(input * 3.0, 0.5, true, &generator);
  };

  const uint64_t start = generator.offset();
  fn(x).sum().backward();
  const Tensor plain_grad = x.grad().clone();
  x.mutable_grad() = Tensor();
  const uint64_t after_one_forward = generator.offset();

  generator.set_offset(start);
  const Tensor out = autograd::checkpoint(fn, x, {.generator = &generator});
  CHECK(generator.offset() == after_one_forward);
  out.sum().backward();
  // The mask of the recomputation is the forward's: without the replay it is a fresh draw.
  CHECK(max_abs_diff(plain_grad, x.grad()) == 0.0);
  CHECK(generator.offset() == after_one_forward);  // backward drew nothing the caller sees
}

TEST_CASE("checkpoint replays the autocast region of the forward in its recomputation") {
  Tensor x = rand_input({4, 8}).to(DType::f32).detach().requires_grad_();
  Tensor w = rand_input({8, 8}).to(DType::f32).detach().requires_grad_();
  const auto fn = [](const TensorList& in) { return matmul(tanh(matmul(in[0], in[1])), in[1]); };
  TensorList plain_grads;
  {
    amp::AutocastGuard autocast(DType::bf16);
    fn({x, w}).to(DType::f32).sum().backward();
    plain_grads = {x.grad().clone(), w.grad().clone()};
  }
  x.mutable_grad() = Tensor();
  w.mutable_grad() = Tensor();
  {
    amp::AutocastGuard autocast(DType::bf16);
    const Tensor out = autograd::checkpoint(fn, {x, w});
    CHECK(out.dtype() == DType::bf16);
    out.to(DType::f32).sum().backward();
  }
  // Recomputed in f32 (backward runs with autocast off) the gradients would differ in the bf16 rounding.
  CHECK(max_abs_diff(plain_grads[0], x.grad()) == 0.0);
  CHECK(max_abs_diff(plain_grads[1], w.grad()) == 0.0);
}

TEST_CASE("parameters used inside checkpoint get gradients even when no input requires grad") {
  auto mlp = make_mlp();
  Tensor x = rand_input({5, 6}).to(DType::f32).detach();
  mlp->forward(x).sum().backward();
  const TensorList plain = take_parameter_grads(*mlp);

  const Tensor out = autograd::checkpoint([&mlp](const Tensor& input) { return mlp->forward(input); }, x);
  CHECK(out.requires_grad());
  out.sum().backward();
  check_same_grads(plain, take_parameter_grads(*mlp));
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("checkpoint refuses a second backward, an input modified in place before backward and an undefined input") {
  const Tensor w = rand_input({3, 3});
  const auto fn = [&w](const Tensor& input) { return matmul(input, w); };

  const Tensor once = autograd::checkpoint(fn, rand_input({2, 3})).sum();
  once.backward();
  CHECK_THROWS_WITH_AS(once.backward(), doctest::Contains("graph was already freed"), Error);

  Tensor x = rand_input({2, 3}) * 1.0;  // a non-leaf, so it may be modified in place
  const Tensor out = autograd::checkpoint(fn, x).sum();
  x.mul_(2.0);
  CHECK_THROWS_WITH_AS(out.backward(), doctest::Contains("modified by an in-place operation"), Error);
  CHECK_THROWS_WITH_AS(autograd::checkpoint([](const TensorList& in) { return in[0]; }, {x, Tensor()}),
                       doctest::Contains("input 1 is an undefined tensor"), Error);
}

TEST_CASE("a callback queued inside a checkpointed segment runs once, after the whole backward") {
  const Tensor outer = rand_input({3});
  Tensor inner = rand_input({3});
  int callbacks = 0;
  bool outer_grad_ready_at_callback = false;
  inner.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::queue_callback([&] {
      ++callbacks;
      outer_grad_ready_at_callback = outer.grad().defined();
    });
  });
  // outer's gradient is computed after the checkpointed segment's (it comes first in the forward).
  const Tensor h = outer * 2.0;
  const Tensor out = autograd::checkpoint([&inner](const Tensor& input) { return input * inner; }, h);
  out.sum().backward();
  CHECK(callbacks == 1);
  CHECK(outer_grad_ready_at_callback);  // DDP's "wait for every bucket" needs the whole pass done
}

TEST_CASE("checkpoint_sequential gives the plain Sequential's output and gradients for every segment count") {
  auto mlp = make_mlp();
  Tensor x = rand_input({5, 6}).to(DType::f32).detach().requires_grad_();
  const Tensor plain_out = mlp->forward(x);
  plain_out.sum().backward();
  const Tensor plain_x_grad = x.grad().clone();
  const TensorList plain = take_parameter_grads(*mlp);

  for (int64_t segments = 1; segments <= 5; ++segments) {
    INFO("segments ", segments);
    x.mutable_grad() = Tensor();
    const Tensor out = nn::checkpoint_sequential(*mlp, segments, x);
    CHECK(max_abs_diff(plain_out, out) == 0.0);
    out.sum().backward();
    CHECK(max_abs_diff(plain_x_grad, x.grad()) == 0.0);
    check_same_grads(plain, take_parameter_grads(*mlp));
  }
  CHECK_THROWS_WITH_AS(nn::checkpoint_sequential(*mlp, 0, x), doctest::Contains("segments must be in [1, 5]"), Error);
  CHECK_THROWS_WITH_AS(nn::checkpoint_sequential(*mlp, 6, x), doctest::Contains("got 6"), Error);
}

TEST_CASE("GPT with activation checkpointing and dropout gives the plain model's loss and gradients") {
  const models::GPTConfig config{.n_layer = 3,
                                 .n_head = 2,
                                 .n_embd = 16,
                                 .vocab_size = 11,
                                 .block_size = 8,
                                 .embd_pdrop = 0.2,
                                 .resid_pdrop = 0.2,
                                 .attn_pdrop = 0.2};
  Generator generator(5);
  models::GPT gpt(config, &generator);
  const Tensor idx = randint(0, 11, {2, 8}, {DType::i64}, &test::rng());
  const Tensor targets = randint(0, 11, {2, 8}, {DType::i64}, &test::rng());

  const uint64_t start = generator.offset();
  const Tensor plain_loss = gpt.forward(idx, targets).second;
  plain_loss.backward();
  const TensorList plain = take_parameter_grads(gpt);
  const uint64_t after_step = generator.offset();

  generator.set_offset(start);
  gpt.activation_checkpointing = true;
  const Tensor loss = gpt.forward(idx, targets).second;
  CHECK(max_abs_diff(plain_loss, loss) == 0.0);
  loss.backward();
  check_same_grads(plain, take_parameter_grads(gpt));
  CHECK(generator.offset() == after_step);
}

TEST_CASE("is_checkpoint_recomputation is true only while the checkpointed function runs again in backward") {
  Tensor x = rand_input({4}).to(DType::f32).detach().requires_grad_();
  std::vector<bool> seen;  // the flag in each run of fn
  const Tensor out = autograd::checkpoint(
      [&seen](const Tensor& input) {
        seen.push_back(autograd::is_checkpoint_recomputation());
        return input * 2.0;
      },
      x);
  out.sum().backward();
  CHECK(seen == std::vector<bool>{false, true});
  CHECK_FALSE(autograd::is_checkpoint_recomputation());
}

TEST_CASE("ResNet with activation checkpointing gives the plain model's gradients and running statistics") {
  // Two models with the same initial weights; one training step each on the same images.
  Generator plain_init(3), checkpointed_init(3);
  const std::array<int64_t, 4> blocks = {1, 1, 1, 1};
  models::ResNet plain(models::ResNetBlock::basic, blocks, {.num_classes = 5, .generator = &plain_init});
  models::ResNet checkpointed(models::ResNetBlock::basic, blocks, {.num_classes = 5, .generator = &checkpointed_init});
  checkpointed.activation_checkpointing = true;
  const Tensor images = rand_input({3, 3, 32, 32}).to(DType::f32).detach();
  const Tensor labels = tensor(std::vector<int64_t>{1, 4, 0});

  const Tensor plain_loss = nn::functional::cross_entropy(plain(images), labels);
  plain_loss.backward();
  const Tensor loss = nn::functional::cross_entropy(checkpointed(images), labels);
  CHECK(loss.grad_fn() != nullptr);
  loss.backward();
  // The recomputation repeats the forward's operations on the same values: equal to the bit.
  CHECK(max_abs_diff(plain_loss, loss) == 0.0);
  check_same_grads(take_parameter_grads(plain), take_parameter_grads(checkpointed));
  // Every block's BatchNorms ran twice; their running statistics and counts moved once.
  const nn::NamedTensors plain_buffers = plain.named_buffers(), buffers = checkpointed.named_buffers();
  REQUIRE(plain_buffers.size() == buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    INFO(buffers[i].first);
    CHECK(max_abs_diff(plain_buffers[i].second, buffers[i].second) == 0.0);
  }
  const auto last_block = std::dynamic_pointer_cast<models::BasicBlock>((*checkpointed.layer4)[0]);
  REQUIRE(last_block != nullptr);
  CHECK(last_block->bn2->num_batches_tracked.item<int64_t>() == 1);
}
