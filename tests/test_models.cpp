// The Fashion-MNIST models: structure, shapes, and a short training run that must learn.
#include <filesystem>

#include "helpers.h"
#include "models/cnn.h"

using namespace sg;

TEST_CASE("the CNN has PyTorch's parameter count and state_dict names") {
  auto model = models::CNN();
  // conv 1*32*25+32, bn 2*32, conv 32*64*25+64, bn 2*64, fc 3136*64+64, fc 64*10+10
  CHECK(models::count_parameters(*model) == 253706);
  const auto state = model->state_dict();
  for (const char* key : {"0.weight", "0.bias", "1.weight", "1.running_mean", "1.running_var", "1.num_batches_tracked",
                          "4.weight", "9.weight", "11.bias"})
    CHECK_MESSAGE(state.count(key) == 1, key);
  CHECK(state.at("9.weight").sizes() == Shape{64, 3136});
}

TEST_CASE("both models map a batch of images to 10 scores") {
  const Tensor images = randn({3, 1, 28, 28}, {}, &test::rng());
  CHECK(models::make_fashion_mnist_model("cnn")->forward(images).sizes() == Shape{3, 10});
  auto basic = models::make_fashion_mnist_model("basicnet");
  basic->eval();
  const Tensor log_probabilities = basic->forward(images);
  CHECK(log_probabilities.sizes() == Shape{3, 10});
  // log_softmax output: each row's probabilities sum to 1
  CHECK(test::max_abs_diff(log_probabilities.exp().sum({1}), ones({3})) < 1e-5);
  CHECK_THROWS_WITH_AS(models::make_fashion_mnist_model("resnet"), doctest::Contains("cnn, basicnet"), Error);
}

TEST_CASE("the CNN clearly learns Fashion-MNIST from a few hundred steps' worth of images") {
  const std::string root = data::FashionMNIST::kDefaultRoot;
  if (!std::filesystem::exists(root)) {
    MESSAGE("skipped: " << root << " is absent (install dataset-fashion-mnist; scripts/setup.sh does)");
    return;
  }
  manual_seed(0);
  const auto normalize = data::Normalize({data::FashionMNIST::kMean}, {data::FashionMNIST::kStd});
  auto train = std::make_shared<data::FashionMNIST>(root, true, normalize);
  auto test = std::make_shared<data::FashionMNIST>(root, false, normalize);
  std::vector<int64_t> first(3200), held_out(1000);
  for (int64_t i = 0; i < 3200; ++i) first[i] = i;
  for (int64_t i = 0; i < 1000; ++i) held_out[i] = i;
  data::DataLoader train_loader(std::make_shared<data::Subset>(train, first), {.batch_size = 64, .shuffle = true});
  data::DataLoader test_loader(std::make_shared<data::Subset>(test, held_out), {.batch_size = 500});

  auto model = models::CNN();
  optim::Adam optimizer(model->parameters(), {.lr = 0.005});
  for (const data::Batch& batch : train_loader) {
    optimizer.zero_grad();
    Tensor loss = nn::functional::cross_entropy((*model)(batch.input), batch.target);
    loss.backward();
    optimizer.step();
  }
  model->eval();
  NoGradGuard no_grad;
  int64_t correct = 0;
  for (const data::Batch& batch : test_loader)
    correct += eq(argmax((*model)(batch.input), 1), batch.target).sum().item<int64_t>();
  // 50 steps of Adam reach about 70% here; chance is 10%. The bound leaves room for seeds and
  // thread counts while still failing for a model that does not learn.
  CHECK(correct > 550);
}
