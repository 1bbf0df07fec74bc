// models::ResNet against torchvision's: parameter counts, state_dict names and shapes, the printed
// tree, logits in eval and training mode for closed-form weights (BasicBlock and Bottleneck), the
// initialisation; training forward and backward; nn::load_pretrained (head dropped, missing and
// unexpected keys reported); the SyncBatchNorm conversion of a whole ResNet.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist_harness.h"
#include "helpers.h"
#include "models/cnn.h"
#include "models/resnet.h"
#include "nn/pretrained.h"
#include "reference/resnet_constants.h"

using namespace sg;
namespace reference = sg::test::resnet_reference;

namespace {

uint32_t fnv1a32(const std::string& text) {
  uint32_t hash = 0x811C9DC5u;
  for (unsigned char byte : text) hash = (hash ^ byte) * 0x01000193u;
  return hash;
}

// The closed-form value of state_dict entry `name` (tests/reference/make_resnet_constants.py says
// why these offsets and scales), in the dtype of `like`.
Tensor closed_form(const std::string& name, const Tensor& like) {
  const std::string leaf = name.substr(name.rfind('.') + 1);
  if (leaf == "num_batches_tracked") return zeros_like(like);
  double offset = 0.0, scale = 0.1;  // bias, running_mean
  if (leaf == "weight" && like.dim() > 1) scale = std::sqrt(4.0 / static_cast<double>(like.numel() / like.size(0)));
  else if (leaf == "weight") offset = 1.0, scale = 0.2;
  else if (leaf == "running_var") offset = 1.0, scale = 0.5;
  const double salt = static_cast<double>(fnv1a32(name) % 10000) / 1000.0;
  std::vector<double> values(static_cast<size_t>(like.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = offset + scale * std::sin(0.37 * static_cast<double>(i) + salt);
  return tensor(values, like.sizes()).to(like.dtype());
}

// `model` in f64, with every tensor of its state_dict set to its closed_form value.
std::shared_ptr<models::ResNet> closed_form_f64(std::shared_ptr<models::ResNet> model) {
  model->to(DType::f64);
  nn::StateDict state;
  for (const auto& [name, tensor] : model->state_dict()) state[name] = closed_form(name, tensor);
  model->load_state_dict(state);
  return model;
}

// Image n is 0.5 * sin((0.11 + 0.05 n) i + 0.5) over its own row-major index i.
Tensor closed_form_images(DType dtype) {
  const int64_t per_image = 3 * reference::kHeight * reference::kWidth;
  std::vector<double> values;
  for (int64_t n = 0; n < reference::kBatch; ++n)
    for (int64_t i = 0; i < per_image; ++i)
      values.push_back(0.5 * std::sin((0.11 + 0.05 * static_cast<double>(n)) * static_cast<double>(i) + 0.5));
  return tensor(values, {reference::kBatch, 3, reference::kHeight, reference::kWidth}).to(dtype);
}

double max_abs(const std::vector<double>& values) {
  double out = 0.0;
  for (double v : values) out = std::max(out, std::abs(v));
  return out;
}

// A ResNet with one BasicBlock per layer: every kind of module and name of resnet18 (downsample
// included) at 40% of its size, for tests about loading and conversion rather than the presets
// (each ctest test is its own process, and building a model draws every initial weight).
std::shared_ptr<models::ResNet> small_resnet(models::ResNetOptions options = {.num_classes = 10}) {
  return std::make_shared<models::ResNet>(models::ResNetBlock::basic, std::array<int64_t, 4>{1, 1, 1, 1}, options);
}

std::map<std::string, Shape> shapes_of(const nn::StateDict& state) {
  std::map<std::string, Shape> out;
  for (const auto& [name, tensor] : state) out[name] = tensor.sizes();
  return out;
}

}  // namespace

namespace {
// `model` has the keys, shapes and dtypes of the torchvision state_dict that `expected` lists
// (num_batches_tracked i64, the rest f32), and its parameters come in torchvision's registration
// order (DDP buckets follow it).
void check_torchvision_keys(const models::ResNet& model, const std::vector<std::pair<std::string, Shape>>& expected) {
  const std::map<std::string, Shape> want(expected.begin(), expected.end());
  const nn::StateDict state = model.state_dict();
  CHECK(shapes_of(state) == want);
  for (const auto& [name, tensor] : state) {
    INFO(name);
    CHECK(tensor.dtype() == (name.ends_with("num_batches_tracked") ? DType::i64 : DType::f32));
  }
  std::vector<std::string> torchvision_order, ours;
  for (const auto& [key, shape] : expected)
    if (!key.ends_with("running_mean") && !key.ends_with("running_var") && !key.ends_with("num_batches_tracked"))
      torchvision_order.push_back(key);
  for (const auto& [name, tensor] : model.named_parameters()) ours.push_back(name);
  CHECK(ours == torchvision_order);
}
}  // namespace

TEST_CASE("resnet18 has torchvision's state_dict keys, shapes and parameter count") {
  auto model = models::resnet18();
  check_torchvision_keys(*model, reference::kResNet18Keys);
  CHECK(models::count_parameters(*model) == 11689512);
}

TEST_CASE("resnet34 has torchvision's parameter count") {
  CHECK(models::count_parameters(*models::resnet34()) == 21797672);
}

TEST_CASE("resnet50 has torchvision's state_dict keys, shapes and parameter count") {
  auto model = models::resnet50();
  check_torchvision_keys(*model, reference::kResNet50Keys);
  CHECK(models::count_parameters(*model) == 25557032);
}

TEST_CASE("resnet18 with closed-form weights gives torchvision's logits in eval mode, in f64 and f32") {
  NoGradGuard no_grad;
  const double scale = max_abs(reference::kEvalLogits);  // about 34
  auto model = closed_form_f64(models::resnet18({.num_classes = reference::kClasses}));
  model->eval();
  // Both sides compute in f64; what remains is summation order over ~20 layers.
  test::check_close((*model)(closed_form_images(DType::f64)), reference::kEvalLogits, 1e-10 * scale);
  // The same weights rounded to f32: rounding (2^-24 relative) accumulated through 20
  // convolutions of up to 4608 terms.
  model->to(DType::f32);
  test::check_close((*model)(closed_form_images(DType::f32)), reference::kEvalLogits, 1e-4 * scale);
}

TEST_CASE("Bottleneck blocks with closed-form weights give torchvision's logits in eval mode") {
  NoGradGuard no_grad;
  auto model = closed_form_f64(
      std::make_shared<models::ResNet>(models::ResNetBlock::bottleneck, std::array<int64_t, 4>{1, 1, 1, 1},
                                       models::ResNetOptions{.num_classes = reference::kClasses}));
  model->eval();
  // f64 on both sides, as for resnet18.
  test::check_close((*model)(closed_form_images(DType::f64)), reference::kBottleneckEvalLogits,
                    1e-10 * max_abs(reference::kBottleneckEvalLogits));
}

TEST_CASE("a training-mode forward of resnet18 matches torchvision's logits and running statistics") {
  auto model = closed_form_f64(models::resnet18({.num_classes = reference::kClasses}));
  model->train();
  const Tensor logits = (*model)(closed_form_images(DType::f64));
  // f64 on both sides, but normalising with batch statistics is ill-conditioned here: channels
  // that are nearly all zero after a ReLU (layer4 sees 8 values per channel) have a tiny variance,
  // and dividing by it amplifies rounding. Measured with torch itself: a relative 1e-14 noise on
  // the weights (the size of a different summation order) moves these logits by 6e-7 (eval: 5e-13).
  test::check_close(logits, reference::kTrainLogits, 1e-5 * max_abs(reference::kTrainLogits));
  test::check_close(model->bn1->running_mean.narrow(0, 0, 8), reference::kTrainBn1RunningMean, 1e-12);
  auto last_block = std::dynamic_pointer_cast<models::BasicBlock>((*model->layer4)[1]);
  REQUIRE(last_block != nullptr);
  test::check_close(last_block->bn2->running_var.narrow(0, 0, 8), reference::kTrainLayer4Block1Bn2RunningVar, 1e-8);
  CHECK(model->bn1->num_batches_tracked.item<int64_t>() == 1);
}

TEST_CASE("resnet18 trains: forward and backward on a tiny batch give a finite gradient for every parameter") {
  Generator generator(7);
  auto model = models::resnet18({.num_classes = 5, .generator = &generator});
  const Tensor images = randn({2, 3, 32, 32}, {}, &test::rng());
  const Tensor labels = tensor(std::vector<int64_t>{1, 4});
  Tensor loss = nn::functional::cross_entropy((*model)(images), labels);
  loss.backward();
  CHECK(std::isfinite(loss.item<double>()));
  for (const auto& [name, parameter] : model->named_parameters()) {
    INFO(name);
    REQUIRE(parameter.grad().defined());
    const double total = parameter.grad().abs().sum().item<double>();
    CHECK(std::isfinite(total));
    CHECK(total > 0.0);  // every parameter takes part in the loss
  }
}

TEST_CASE("the initialisation is torchvision's: kaiming-normal fan_out convolutions, BatchNorm 1 and 0") {
  Generator generator(11);
  auto model = small_resnet({.generator = &generator});
  auto block = std::dynamic_pointer_cast<models::BasicBlock>((*model->layer4)[0]);
  REQUIRE(block != nullptr);
  const auto sample_std = [](const Tensor& t) { return std::sqrt(t.pow(2.0).mean().item<double>()); };
  // layer4.0.conv2 [512, 512, 3, 3]: std sqrt(2 / (512 * 9)); 2.4M draws put the sample std
  // within 0.1% of it, the 1% bound leaves room for any seed.
  CHECK(sample_std(block->conv2->weight) == doctest::Approx(std::sqrt(2.0 / (512 * 9))).epsilon(0.01));
  // conv1 [64, 3, 7, 7] tells the modes apart: fan_out 64 * 49 gives std 0.0253, fan_in 3 * 49 would
  // give 0.117. 9408 draws: the sample std is within 0.7% (one sigma); 3% is over four sigmas.
  CHECK(sample_std(model->conv1->weight) == doctest::Approx(std::sqrt(2.0 / (64 * 49))).epsilon(0.03));
  CHECK(test::max_abs_diff(model->bn1->weight, ones({64})) == 0.0);
  CHECK(test::max_abs_diff(block->bn2->bias, zeros({512})) == 0.0);
  CHECK(test::max_abs_diff(block->bn2->weight, ones({512})) == 0.0);
  // fc keeps nn::Linear's U(-1/sqrt(512), 1/sqrt(512)): a bound no normal draw of 512000 respects.
  CHECK(model->fc->weight.abs().max().item<double>() <= 1.0 / std::sqrt(512.0));
}

TEST_CASE("zero_init_residual starts the last BatchNorm of every block at weight 0") {
  auto basic = small_resnet({.num_classes = 10, .zero_init_residual = true});
  int zeroed = 0;
  for (const auto& [name, tensor] : basic->named_parameters()) {
    if (!name.ends_with("bn2.weight")) continue;
    CHECK_MESSAGE(tensor.abs().sum().item<double>() == 0.0, name);
    ++zeroed;
  }
  CHECK(zeroed == 4);
  CHECK(basic->bn1->weight.min().item<double>() == 1.0);  // other BatchNorms unchanged
  auto bottlenecks =
      std::make_shared<models::ResNet>(models::ResNetBlock::bottleneck, std::array<int64_t, 4>{1, 1, 1, 1},
                                       models::ResNetOptions{.num_classes = 10, .zero_init_residual = true});
  auto first = std::dynamic_pointer_cast<models::Bottleneck>((*bottlenecks->layer1)[0]);
  REQUIRE(first != nullptr);
  CHECK(first->bn3->weight.abs().sum().item<double>() == 0.0);
  CHECK(first->bn2->weight.min().item<double>() == 1.0);
}

TEST_CASE("load_pretrained drops the head whose shape differs and reports missing and unexpected keys") {
  auto source = small_resnet({.num_classes = 1000});
  nn::StateDict state = source->state_dict();
  state.erase("layer4.0.bn2.running_var");
  state["projection.weight"] = zeros({4, 4});
  test::TempDir dir;
  const std::string path = dir.path() + "/resnet18.safetensors";
  save_safetensors(path, state);

  auto target = small_resnet();
  const Tensor fc_before = target->fc->weight.clone();
  const nn::PretrainedReport report = nn::load_pretrained(*target, path);
  CHECK(report.dropped_keys ==
        std::vector<std::string>{"fc.bias (file [1000], model [10])", "fc.weight (file [1000, 512], model [10, 512])"});
  CHECK(report.missing_keys == std::vector<std::string>{"layer4.0.bn2.running_var"});
  CHECK(report.unexpected_keys == std::vector<std::string>{"projection.weight"});
  CHECK(report.loaded == 71);  // 74 tensors but the dropped head and the missing buffer
  CHECK(report.expected == 74);
  CHECK(report.str() ==
        "loaded 71 of 74 tensors\n"
        "dropped, shape differs from the model's (2): fc.bias (file [1000], model [10]), "
        "fc.weight (file [1000, 512], model [10, 512])\n"
        "missing from the file (1): layer4.0.bn2.running_var\n"
        "unexpected, not in the model (1): projection.weight\n");
  // Everything else came from the file; the head and the missing buffer kept their own values.
  const nn::StateDict loaded = target->state_dict(), original = source->state_dict();
  for (const auto& [name, tensor] : loaded) {
    if (name.starts_with("fc.") || name == "layer4.0.bn2.running_var") continue;
    INFO(name);
    CHECK(test::max_abs_diff(tensor, original.at(name)) == 0.0);
  }
  CHECK(test::max_abs_diff(target->fc->weight, fc_before) == 0.0);
}

TEST_CASE("load_pretrained of a matching state_dict reports nothing and reproduces the source's logits") {
  Generator source_generator(3), target_generator(4);
  auto source = small_resnet({.num_classes = 10, .generator = &source_generator});
  auto target = small_resnet({.num_classes = 10, .generator = &target_generator});
  const nn::PretrainedReport report = nn::load_pretrained(*target, source->state_dict());
  CHECK(report.dropped_keys.empty());
  CHECK(report.missing_keys.empty());
  CHECK(report.unexpected_keys.empty());
  CHECK(report.str() ==
        "loaded 74 of 74 tensors\n"
        "dropped, shape differs from the model's (0): (none)\nmissing from the file (0): (none)\n"
        "unexpected, not in the model (0): (none)\n");
  source->eval();
  target->eval();
  NoGradGuard no_grad;
  const Tensor images = randn({1, 3, 32, 32}, {}, &test::rng());
  CHECK(test::max_abs_diff((*target)(images), (*source)(images)) == 0.0);
}

TEST_CASE("a strict load of another head's state_dict names both fc keys with both shapes") {
  auto target = small_resnet();
  CHECK_THROWS_WITH_AS(target->load_state_dict(small_resnet({.num_classes = 1000})->state_dict()),
                       doctest::Contains("mis-shaped keys: fc.weight (checkpoint [1000, 512], model [10, 512]), "
                                         "fc.bias (checkpoint [1000], model [10])"),
                       Error);
}

TEST_CASE("load_pretrained refuses a tensor of another dtype or a file it cannot read, naming the key or the file") {
  auto model = small_resnet();
  nn::StateDict state = model->state_dict();
  state["conv1.weight"] = state["conv1.weight"].to(DType::f64);
  CHECK_THROWS_WITH_AS(nn::load_pretrained(*model, state),
                       doctest::Contains("conv1.weight (checkpoint f64, model f32)"), Error);
  CHECK_THROWS_WITH_AS(nn::load_pretrained(*model, "/nonexistent/resnet18.safetensors"),
                       doctest::Contains("/nonexistent/resnet18.safetensors"), Error);
}

TEST_CASE("convert_sync_batchnorm converts every BatchNorm of a ResNet and keeps every key") {
  Generator generator(5);
  auto model = small_resnet({.num_classes = 10, .generator = &generator});
  auto plain = small_resnet();
  plain->load_state_dict(model->state_dict());
  const std::map<std::string, Shape> before = shapes_of(model->state_dict());
  // bn1, two per block in 4 blocks, and the downsample BatchNorms of layer2, layer3 and layer4.
  CHECK(dist::convert_sync_batchnorm(*model) == 12);
  CHECK(shapes_of(model->state_dict()) == before);
  // With one process the synchronised statistics are the local ones.
  const Tensor images = randn({2, 3, 32, 32}, {}, &test::rng());
  CHECK(test::max_abs_diff((*model)(images), (*plain)(images)) < 1e-6);
  CHECK(test::max_abs_diff(model->bn1->running_mean, plain->bn1->running_mean) < 1e-7);
}

TEST_CASE("a ResNet rejects input that is not a batch of 3-channel images, naming its shape") {
  auto model = small_resnet();
  CHECK_THROWS_WITH_AS((*model)(zeros({2, 1, 32, 32})), doctest::Contains("[N, 3, H, W], got [2, 1, 32, 32]"), Error);
  CHECK_THROWS_WITH_AS((*model)(zeros({3, 32, 32})), doctest::Contains("got [3, 32, 32]"), Error);
  CHECK_THROWS_WITH_AS(models::make_resnet("resnet101"), doctest::Contains("resnet18, resnet34, resnet50"), Error);
  CHECK_THROWS_WITH_AS(models::resnet18({.num_classes = 0}), doctest::Contains("num_classes"), Error);
}

TEST_CASE("make_resnet builds a preset by name with its options, and str() prints torchvision's tree") {
  auto model = models::make_resnet("resnet18", {.num_classes = 10});
  std::string want = reference::kResNet18Tree;  // printed with 1000 classes
  const std::string head = "out_features=1000";
  REQUIRE(want.find(head) != std::string::npos);
  want.replace(want.find(head), head.size(), "out_features=10");
  CHECK(model->str() == want);
  // Only fc depends on num_classes: 512 * 10 + 10 parameters instead of 512 * 1000 + 1000.
  CHECK(models::count_parameters(*model) == 11689512 - 513 * 990);
}
