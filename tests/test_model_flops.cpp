// Model FLOPs (Note [Model FLOPs] in nn/flop_count.h): the hook count of Conv2d and Linear layers against
// hand computations and torchvision's ResNet34 figure, what the count leaves behind, and GPT's formula
// against the parameters of a built model.
#include <memory>
#include <string>

#include "helpers.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "nn/activation.h"
#include "nn/basic.h"
#include "nn/batchnorm.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/flop_count.h"
#include "nn/linear.h"

using namespace sg;

namespace {

// [N, 3, 5, 5] -> conv 3->4 k3 p1 -> [N, 4, 5, 5] -> conv 4->6 k3 stride 2 groups 2 -> [N, 6, 2, 2] -> flatten ->
// linear 24->5.
std::shared_ptr<nn::Sequential> tiny_conv_linear_model() {
  using std::make_shared;
  return make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      make_shared<nn::Conv2d>(3, 4, 3, nn::Conv2dOptions{.padding = 1}), make_shared<nn::BatchNorm2d>(4),
      make_shared<nn::ReLU>(), make_shared<nn::Conv2d>(4, 6, 3, nn::Conv2dOptions{.stride = 2, .groups = 2}),
      make_shared<nn::Flatten>(), make_shared<nn::Linear>(24, 5)});
}

// An f32 input (the layers' dtype) of `shape`, drawn from the test's generator.
Tensor f32_input(const Shape& shape) { return randn(shape, {}, &test::rng()); }

}  // namespace

TEST_CASE("the training FLOPs of a conv and linear model are 3 forwards of 2 FLOPs per multiply-add counted by hand") {
  auto model = tiny_conv_linear_model();
  // Per example: conv1 4 x 5 x 5 outputs x (3 x 3 x 3) = 2700 multiply-adds; conv2 6 x 2 x 2 outputs x
  // (4 / 2 groups x 3 x 3) = 432; linear 5 outputs x 24 = 120. 3252 in all.
  constexpr int64_t kMultiplyAddsPerExample = 2700 + 432 + 120;
  CHECK(nn::forward_flops(*model, f32_input({1, 3, 5, 5})) == 2 * kMultiplyAddsPerExample);
  CHECK(nn::training_flops(*model, f32_input({1, 3, 5, 5})) == 3 * 2 * kMultiplyAddsPerExample);
  CHECK(nn::training_flops(*model, f32_input({7, 3, 5, 5})) == 7 * 3 * 2 * kMultiplyAddsPerExample);
}

TEST_CASE("counting FLOPs leaves the model as it was: every module's mode, the BatchNorm statistics, no hooks") {
  auto model = tiny_conv_linear_model();
  auto* batchnorm = dynamic_cast<nn::BatchNorm2d*>(model->children()[1].get());
  REQUIRE(batchnorm != nullptr);
  model->children()[3]->eval();  // one module in another mode than the model's
  const Tensor running_mean = batchnorm->running_mean.clone();
  const Tensor input = f32_input({2, 3, 5, 5});
  const int64_t first = nn::forward_flops(*model, input);
  CHECK(model->is_training());
  CHECK(batchnorm->is_training());
  CHECK_FALSE(model->children()[3]->is_training());
  CHECK(test::max_abs_diff(batchnorm->running_mean, running_mean) == 0);
  CHECK(nn::forward_flops(*model, input) == first);  // the first count's hooks are gone: each layer counts once
}

TEST_CASE("forward_flops refuses a model whose forward calls no Conv2d or Linear, rather than reporting 0") {
  auto model = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::ReLU>()});
  CHECK_THROWS_WITH(nn::forward_flops(*model, f32_input({2, 3})),
                    doctest::Contains("called no Conv2d or Linear layer"));
}

TEST_CASE("ResNet34 at 224 x 224 counts torchvision's 3.66 G multiply-adds per image") {
  // Summed layer by layer (conv1 118.0 M, the 33 3x3 and 3 1x1 convolutions of the blocks, fc 0.5 M):
  // 3,663,761,408, what torchvision's model table lists as 3.66 "GFLOPS" for resnet34.
  auto model = models::resnet34();
  CHECK(nn::forward_flops(*model, f32_input({1, 3, 224, 224})) == 2 * int64_t{3'663'761'408});
}

TEST_CASE("GPT's training FLOPs per token are 6 N + 12 L C T, N every parameter but the embeddings") {
  const models::GPTConfig config{.n_layer = 2, .n_head = 2, .n_embd = 8, .vocab_size = 10, .block_size = 4};
  // N: per block 13 C^2 + 14 C = 944, ln_f 2 C = 16, head V C = 80: 2 x 944 + 16 + 80 = 1984.
  // 6 N = 11904; attention 12 x 2 layers x 8 x 4 = 768.
  CHECK(models::gpt_training_flops_per_token(models::resolve_gpt_config(config)) == 11904 + 768);

  Generator generator(3);
  const models::GPT model(config, &generator);
  int64_t multiplied = 0;
  for (const auto& [name, parameter] : model.named_parameters())
    if (!name.starts_with("emb_stem.")) multiplied += parameter.numel();
  CHECK(models::gpt_training_flops_per_token(model.config) == 6.0 * static_cast<double>(multiplied) + 768);
}
