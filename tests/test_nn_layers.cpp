// The layers of nn/: init, Linear, activations, Dropout, Flatten / Identity, Sequential /
// ModuleList, BatchNorm1d / 2d and LayerNorm — hand-computed values, initial statistics,
// train / eval behaviour, running statistics, gradients against finite differences, and the
// fused norm kernels against the composite formula on odd shapes and strided inputs.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/kernels/random.h"
#include "helpers.h"

using namespace sg;

namespace {

// Mean and (population) standard deviation of a tensor's values.
struct Moments {
  double mean = 0, std = 0;
};
Moments moments(const Tensor& t) {
  const std::vector<double> v = test::values(t);
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size()));
  return m;
}

double max_abs(const Tensor& t) {
  double worst = 0;
  for (double x : test::values(t)) worst = std::max(worst, std::abs(x));
  return worst;
}

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

// Writes values into a parameter, as a test sets up a layer by hand.
void assign(const Tensor& parameter, const std::vector<double>& values) {
  NoGradGuard no_grad;
  Tensor target = parameter;
  target.copy_(tensor(values, parameter.sizes()));
}

// A per-channel [C] tensor shaped to broadcast against [N, C, ...] of `rank` dims.
Tensor per_channel(const Tensor& t, int64_t rank) {
  Shape shape(rank, 1);
  shape[1] = t.size(0);
  return t.reshape(shape);
}

Shape all_dims_but_channels(int64_t rank) {
  Shape dims{0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

// Batch norm written with separate ops (training: batch statistics, biased variance).
Tensor composite_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const Shape dims = all_dims_but_channels(x.dim());
  const Tensor mean = x.mean(dims, true), var = x.var(dims, /*unbiased=*/false, true);
  return (x - mean) * rsqrt(var + eps) * per_channel(weight, x.dim()) + per_channel(bias, x.dim());
}

// Layer norm written with separate ops over the last `normalized_dims` dims.
Tensor composite_layer_norm(const Tensor& x, int64_t normalized_dims, const Tensor& weight, const Tensor& bias,
                            double eps) {
  Shape dims;
  for (int64_t d = x.dim() - normalized_dims; d < x.dim(); ++d) dims.push_back(d);
  const Tensor mean = x.mean(dims, true), var = x.var(dims, /*unbiased=*/false, true);
  return (x - mean) * rsqrt(var + eps) * weight + bias;
}

// The gradients of sum(out * g) with respect to `inputs` (which require grad), cleared afterwards.
TensorList gradients(const Tensor& out, const Tensor& g, const TensorList& inputs) {
  (out * g).sum().backward();
  TensorList grads;
  for (Tensor input : inputs) {
    grads.push_back(input.grad().clone());
    input.set_grad(Tensor());
  }
  return grads;
}

}  // namespace

// ---- init ----

TEST_CASE("calculate_gain gives PyTorch's recommended gains") {
  using nn::init::Nonlinearity;
  CHECK(nn::init::calculate_gain(Nonlinearity::linear) == 1.0);
  CHECK(nn::init::calculate_gain(Nonlinearity::sigmoid) == 1.0);
  CHECK(nn::init::calculate_gain(Nonlinearity::tanh) == doctest::Approx(5.0 / 3.0));
  CHECK(nn::init::calculate_gain(Nonlinearity::relu) == doctest::Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain(Nonlinearity::leaky_relu) == doctest::Approx(std::sqrt(2.0 / (1 + 0.01 * 0.01))));
  CHECK(nn::init::calculate_gain(Nonlinearity::leaky_relu, std::sqrt(5.0)) == doctest::Approx(std::sqrt(1.0 / 3.0)));
  CHECK(nn::init::calculate_gain(Nonlinearity::selu) == 0.75);
}

TEST_CASE("fan in and fan out count the receptive field of Linear and Conv weights") {
  CHECK(nn::init::calculate_fan_in_and_fan_out(empty({3, 4})) == std::pair<int64_t, int64_t>{4, 3});
  CHECK(nn::init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 5})) == std::pair<int64_t, int64_t>{75, 200});
  CHECK_THROWS_WITH_AS(nn::init::calculate_fan_in_and_fan_out(empty({5})), doctest::Contains("fewer than 2 dims"),
                       Error);
}

TEST_CASE("kaiming and xavier initialisations have the bounds and spreads of their formulas") {
  using nn::init::FanMode;
  using nn::init::Nonlinearity;
  // 131072 draws: sample means and stds are within 1% of the true ones at > 5 sigma.
  const Tensor conv = empty({512, 16, 4, 4});  // fan_in 256, fan_out 8192
  nn::init::kaiming_uniform_(conv, 0.0, FanMode::fan_in, Nonlinearity::relu, &test::rng());
  const double kaiming_bound = std::sqrt(6.0 / 256);
  CHECK(max_abs(conv) <= kaiming_bound);
  CHECK(max_abs(conv) > 0.999 * kaiming_bound);
  CHECK(moments(conv).std == doctest::Approx(kaiming_bound / std::sqrt(3.0)).epsilon(0.01));

  nn::init::kaiming_normal_(conv, 0.0, FanMode::fan_out, Nonlinearity::relu, &test::rng());
  CHECK(moments(conv).std == doctest::Approx(std::sqrt(2.0 / 8192)).epsilon(0.01));
  CHECK(std::abs(moments(conv).mean) < 0.01 * std::sqrt(2.0 / 8192));

  const Tensor linear = empty({300, 200});
  nn::init::xavier_uniform_(linear, 1.0, &test::rng());
  const double xavier_bound = std::sqrt(6.0 / 500);
  CHECK(max_abs(linear) <= xavier_bound);
  CHECK(max_abs(linear) > 0.999 * xavier_bound);
  nn::init::xavier_normal_(linear, 2.0, &test::rng());
  CHECK(moments(linear).std == doctest::Approx(2.0 * std::sqrt(2.0 / 500)).epsilon(0.01));
}

TEST_CASE("trunc_normal_ stays within its bounds with the truncated normal's spread") {
  const Tensor t = empty({200000}, {DType::f64});
  nn::init::trunc_normal_(t, 0.0, 1.0, -2.0, 2.0, &test::rng());
  CHECK(max_abs(t) <= 2.0);
  // The standard normal on [-2, 2] has variance 1 - 2 * 2 * phi(2) / (Phi(2) - Phi(-2)).
  const double phi2 = std::exp(-2.0) / std::sqrt(2 * std::numbers::pi);
  const double mass = std::erf(2.0 / std::numbers::sqrt2);
  CHECK(moments(t).std == doctest::Approx(std::sqrt(1 - 4 * phi2 / mass)).epsilon(0.005));
  CHECK(std::abs(moments(t).mean) < 0.01);
  // One-sided: the half-normal's mean is sqrt(2 / pi).
  nn::init::trunc_normal_(t, 1.0, 0.5, 1.0, 100.0, &test::rng());
  const std::vector<double> v = test::values(t);
  CHECK(*std::min_element(v.begin(), v.end()) >= 1.0);
  CHECK(moments(t).mean == doctest::Approx(1.0 + 0.5 * std::sqrt(2 / std::numbers::pi)).epsilon(0.005));
}

TEST_CASE("init fills are reproducible from a generator and leave no autograd history") {
  const Tensor a = empty({64}).requires_grad_(), b = empty({64});
  Generator first(7), second(7);
  nn::init::normal_(a, 0.0, 1.0, &first);
  nn::init::normal_(b, 0.0, 1.0, &second);
  CHECK(test::values(a) == test::values(b));
  CHECK(a.is_leaf());
  nn::init::constant_(a, 0.25);
  CHECK(test::values(a) == std::vector<double>(64, 0.25));
  nn::init::zeros_(b);
  CHECK(max_abs(b) == 0.0);
}

// ---- Linear ----

TEST_CASE("Linear computes x W^T + b for a batch, for more dims and for a single vector") {
  nn::Linear layer(3, 2);
  assign(layer.weight, {1, 2, 3, 4, 5, 6});
  assign(layer.bias, {0.5, -1});
  const Tensor x = tensor(std::vector<float>{1, 0, -1, 2, 1, 0}, {2, 3});
  CHECK(test::values(layer(x)) == std::vector<double>{-1.5, -3, 4.5, 12});
  const Tensor batched = layer(x.reshape({2, 1, 3}));
  CHECK(batched.sizes() == Shape{2, 1, 2});
  CHECK(test::values(batched) == std::vector<double>{-1.5, -3, 4.5, 12});
  CHECK(test::values(layer(x[1])) == std::vector<double>{4.5, 12});
}

TEST_CASE("Linear without bias has only a weight") {
  nn::Linear layer(3, 2, /*bias=*/false);
  assign(layer.weight, {1, 2, 3, 4, 5, 6});
  CHECK(names_of(layer.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(test::values(layer(tensor(std::vector<float>{1, 0, -1}, {1, 3}))) == std::vector<double>{-2, -2});
}

TEST_CASE("Linear starts uniform within 1/sqrt(in_features), as PyTorch") {
  nn::Linear layer(256, 128, true, &test::rng());
  const double bound = 1.0 / 16;
  CHECK(max_abs(layer.weight) <= bound);
  CHECK(max_abs(layer.weight) > 0.99 * bound);
  // 32768 uniform draws: the std is within 2% of bound / sqrt(3) at > 5 sigma
  CHECK(moments(layer.weight).std == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  CHECK(max_abs(layer.bias) <= bound);
  CHECK(max_abs(layer.bias) > 0.5 * bound);  // 128 draws: not all in the inner half
}

TEST_CASE("Linear rejects an input whose last dim is not in_features, naming both shapes") {
  nn::Linear layer(4, 3);
  CHECK_THROWS_WITH_AS(layer(zeros({2, 5})),
                       doctest::Contains("input of shape [2, 5] does not match weight of shape [3, 4]"), Error);
}

TEST_CASE("Linear passes gradcheck for input, weight and bias in 2-D and 3-D") {
  nn::Linear layer(3, 2);
  layer.to(DType::f64);
  // gradcheck perturbs its inputs in place, so passing the layer's own parameters checks them too.
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 3}})
    CHECK_GRADCHECK([&](const TensorList& in) { return layer(in[0]); },
                    {test::rand_input(shape), layer.weight, layer.bias});
}

// ---- activations ----

TEST_CASE("ReLU, Tanh, Sigmoid and GELU modules compute their functions") {
  const Tensor x = tensor(std::vector<double>{1, -1, 0.5});
  // Values from torch 1.13 (f64): F.gelu, F.gelu(approximate='tanh'), torch.tanh, torch.sigmoid.
  constexpr double kDigits = 1e-15;
  CHECK(test::values(nn::ReLU()(x)) == std::vector<double>{1, 0, 0.5});
  test::check_close(nn::Tanh()(x), {0.7615941559557649, -0.7615941559557649, 0.46211715726000974}, kDigits);
  test::check_close(nn::Sigmoid()(x), {0.7310585786300049, 0.2689414213699951, 0.6224593312018546}, kDigits);
  test::check_close(nn::GELU()(x), {0.841344746068543, -0.15865525393145702, 0.34573123063700656}, kDigits);
  test::check_close(nn::GELU("tanh")(x), {0.8411919906082768, -0.15880800939172324, 0.34571400982514394}, kDigits);
  CHECK_THROWS_WITH_AS(nn::GELU("erf"), doctest::Contains("approximate must be"), Error);
}

// ---- Dropout ----

TEST_CASE("Dropout in eval mode returns its input unchanged") {
  nn::Dropout dropout(0.5);
  dropout.eval();
  const Tensor x = randn({10}, {}, &test::rng());
  CHECK(dropout(x).is_same(x));
}

TEST_CASE("Dropout in training zeroes about p of the elements and scales the rest by 1 / (1 - p)") {
  Generator generator(11);
  nn::Dropout dropout(0.3, &generator);
  const Tensor y = dropout(ones({100000}));
  const std::vector<double> v = test::values(y);
  const double zero_fraction = static_cast<double>(std::count(v.begin(), v.end(), 0.0)) / static_cast<double>(v.size());
  CHECK(std::abs(zero_fraction - 0.3) < 0.01);  // the fraction's std is 0.0015: 0.01 is 7 sigma
  const bool kept_scaled = std::all_of(v.begin(), v.end(), [](double value) {
    return value == 0.0 || std::abs(value - 1 / 0.7) < 1e-6;  // 1 / 0.7 rounded to f32
  });
  CHECK(kept_scaled);
}

TEST_CASE("Dropout masks repeat with the seed and the gradient is the mask") {
  Generator a(5), b(5), c(6);
  const Tensor x = test::rand_input({64});
  const Tensor first = nn::functional::dropout(x, 0.5, true, &a);
  CHECK(test::values(first) == test::values(nn::functional::dropout(x, 0.5, true, &b)));
  CHECK(test::values(first) != test::values(nn::functional::dropout(x, 0.5, true, &c)));
  first.sum().backward();
  CHECK(test::values(x.grad() * x) == test::values(first));  // grad = mask, first = x * mask
}

TEST_CASE("one-pass dropout equals bernoulli_, scale and multiply to the bit, forward and backward") {
  // The reference is the three passes of core/kernels/dropout.h from a generator in the same state:
  // the same draws, values, gradients and generator offset, for every floating dtype, a transposed
  // input, an odd size (the last Philox block half used), p = 1, and 1 or 2 threads.
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const double p : {0.3, 1.0}) {
      for (const int threads : {1, 2}) {
        CAPTURE(dtype);
        CAPTURE(p);
        CAPTURE(threads);
        const test::NumThreadsGuard guard(threads);
        const Tensor x = randn({7, 129}, {}, &test::rng()).to(dtype).transpose(0, 1).detach().requires_grad_();
        Generator fused_generator(21), reference_generator(21);
        fused_generator.reserve(3);
        reference_generator.reserve(3);
        const Tensor out = nn::functional::dropout(x, p, true, &fused_generator);
        Tensor mask = empty(x.sizes(), {dtype});
        kernels::bernoulli_(mask, 1 - p, reference_generator);
        if (p < 1) mask.mul_(1 / (1 - p));
        CHECK(test::values(out) == test::values(x.detach() * mask));
        CHECK(fused_generator.offset() == reference_generator.offset());
        const Tensor weight = randn({129, 7}, {}, &test::rng()).to(dtype);
        out.backward(weight);
        CHECK(test::values(x.grad()) == test::values(weight * mask));
      }
    }
  }
}

TEST_CASE("dropout with p = 0 is the identity, p = 1 zeroes everything, other p are refused") {
  const Tensor x = randn({8}, {}, &test::rng());
  CHECK(nn::functional::dropout(x, 0.0).is_same(x));
  CHECK(max_abs(nn::functional::dropout(x, 1.0)) == 0.0);
  CHECK_THROWS_WITH_AS(nn::Dropout(1.5), doctest::Contains("probability must be in [0, 1]"), Error);
}

// ---- Flatten and Identity ----

TEST_CASE("Flatten keeps the batch dim by default and Identity returns its input") {
  const Tensor x = zeros({2, 3, 4, 5});
  CHECK(nn::Flatten()(x).sizes() == Shape{2, 60});
  CHECK(nn::Flatten(0, 1)(x).sizes() == Shape{6, 4, 5});
  CHECK(nn::Identity()(x).is_same(x));
}

// ---- Sequential and ModuleList ----

TEST_CASE("Sequential chains its modules and names them by position") {
  auto first = std::make_shared<nn::Linear>(3, 4);
  auto model = nn::Sequential{first, std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2)};
  CHECK(names_of(model.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(model.size() == 3);
  CHECK(model[0].get() == first.get());
  const Tensor x = randn({5, 3}, {}, &test::rng());
  const Tensor expected = (*model[2])(relu((*first)(x)));
  CHECK(test::values(model(x)) == test::values(expected));
  CHECK_THROWS_WITH_AS(model[3], doctest::Contains("index 3 is out of range for 3 modules"), Error);
  CHECK(model.str().find("(0): Linear(in_features=3, out_features=4, bias=True)") != std::string::npos);
}

TEST_CASE("Sequential::push_back appends under the next position and returns a typed handle") {
  nn::Sequential model;
  const Tensor x = randn({2, 3}, {}, &test::rng());
  CHECK(model(x).is_same(x));  // empty: the identity
  std::shared_ptr<nn::Linear> linear = model.push_back(std::make_shared<nn::Linear>(3, 3));
  model.push_back(std::make_shared<nn::Tanh>());
  CHECK(linear->in_features == 3);
  CHECK(names_of(model.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  CHECK(test::values(model(x)) == test::values(tanh((*linear)(x))));
}

TEST_CASE("ModuleList registers its modules by position but has no forward") {
  nn::ModuleList blocks{std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::Linear>(2, 2, false)};
  CHECK(names_of(blocks.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight"});
  int count = 0;
  for (const auto& block : blocks) count += block != nullptr;
  CHECK(count == 2);
  CHECK_THROWS_AS(blocks(zeros({1, 2})), Error);
}

// ---- BatchNorm ----
// Two batches of [N = 4, C = 2] with statistics easy to follow by hand:
//   batch 1: channel 0 = 1, 3, 5, 7 (mean 4, biased var 5, unbiased 20/3),
//            channel 1 = 2, 6, 10, 2 (mean 5, biased var 11, unbiased 44/3);
//   batch 2: channel 0 = 0, 2, 4, 6 (mean 3, unbiased var 20/3),
//            channel 1 = 1, 1, 1, 5 (mean 2, unbiased var 4).

namespace {
Tensor bn_batch1() { return tensor(std::vector<double>{1, 2, 3, 6, 5, 10, 7, 2}, {4, 2}); }
Tensor bn_batch2() { return tensor(std::vector<double>{0, 1, 2, 1, 4, 1, 6, 5}, {4, 2}); }
constexpr double kEps = 1e-5;
}  // namespace

TEST_CASE("BatchNorm starts with unit weight, zero bias, zero mean and unit variance buffers") {
  nn::BatchNorm2d bn(3);
  CHECK(names_of(bn.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(names_of(bn.named_buffers()) == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  CHECK(test::values(bn.weight) == std::vector<double>{1, 1, 1});
  CHECK(test::values(bn.bias) == std::vector<double>{0, 0, 0});
  CHECK(test::values(bn.running_mean) == std::vector<double>{0, 0, 0});
  CHECK(test::values(bn.running_var) == std::vector<double>{1, 1, 1});
  CHECK(bn.num_batches_tracked.dtype() == DType::i64);
  CHECK(bn.num_batches_tracked.dim() == 0);
  CHECK(bn.str() == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
}

TEST_CASE("BatchNorm in training normalises with the batch's mean and biased variance") {
  nn::BatchNorm1d bn(2);
  bn.to(DType::f64);
  const double s0 = std::sqrt(5 + kEps), s1 = std::sqrt(11 + kEps);
  test::check_close(bn(bn_batch1()), {-3 / s0, -3 / s1, -1 / s0, 1 / s1, 1 / s0, 5 / s1, 3 / s0, -3 / s1}, 1e-12);
}

TEST_CASE("BatchNorm's running statistics after two steps follow PyTorch's update with the unbiased variance") {
  nn::BatchNorm1d bn(2);
  bn.to(DType::f64);
  bn(bn_batch1());
  bn(bn_batch2());
  // running = 0.9 * running + 0.1 * batch, from mean 0 and var 1:
  // mean: 0.9 * (0.1 * 4) + 0.1 * 3 = 0.66,  0.9 * (0.1 * 5) + 0.1 * 2 = 0.65
  // var:  0.9 * (0.9 + 0.1 * 20/3) + 0.1 * 20/3,  0.9 * (0.9 + 0.1 * 44/3) + 0.1 * 4 = 2.53
  test::check_close(bn.running_mean, {0.66, 0.65}, 1e-12);
  test::check_close(bn.running_var, {0.9 * (0.9 + 2.0 / 3) + 2.0 / 3, 2.53}, 1e-12);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
}

TEST_CASE("BatchNorm with momentum nullopt keeps the cumulative average of the batch statistics") {
  nn::BatchNorm1d bn(2, kEps, std::nullopt);
  bn.to(DType::f64);
  bn(bn_batch1());
  bn(bn_batch2());
  test::check_close(bn.running_mean, {3.5, 3.5}, 1e-12);
  test::check_close(bn.running_var, {20.0 / 3, (44.0 / 3 + 4) / 2}, 1e-12);
  CHECK(bn.str().find("momentum=None") != std::string::npos);
}

TEST_CASE("BatchNorm in eval normalises with the running statistics and leaves them alone") {
  nn::BatchNorm1d bn(2);
  bn.to(DType::f64);
  assign(bn.weight, {2, 0.5});
  assign(bn.bias, {1, -1});
  bn(bn_batch1());  // running mean 0.4, 0.5; running var 0.9 + 2/3, 0.9 + 22/15
  bn.eval();
  const std::vector<double> mean{0.4, 0.5}, var{0.9 + 2.0 / 3, 0.9 + 22.0 / 15}, weight{2, 0.5}, bias{1, -1};
  const std::vector<double> x = test::values(bn_batch1());
  std::vector<double> expected;
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i % 2;
    expected.push_back((x[i] - mean[c]) / std::sqrt(var[c] + kEps) * weight[c] + bias[c]);
  }
  test::check_close(bn(bn_batch1()), expected, 1e-12);
  test::check_close(bn.running_mean, mean, 1e-12);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
}

TEST_CASE("BatchNorm without running statistics uses the batch's in eval too, and affine=false has no parameters") {
  nn::BatchNorm1d bn(2, kEps, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  bn.to(DType::f64);
  CHECK(bn.named_parameters().empty());
  CHECK(bn.named_buffers().empty());
  const Tensor train_out = bn(bn_batch1());
  bn.eval();
  CHECK(test::values(bn(bn_batch1())) == test::values(train_out));
}

TEST_CASE("BatchNorm rejects wrong ranks, channel counts, and one value per channel in training") {
  nn::BatchNorm2d bn2d(3);
  CHECK_THROWS_WITH_AS(bn2d(zeros({2, 3, 4})),
                       doctest::Contains("BatchNorm2d: expected an input of shape [N, C, H, W]"), Error);
  CHECK_THROWS_WITH_AS(bn2d(zeros({2, 4, 2, 2})), doctest::Contains("expected 3 channels"), Error);
  nn::BatchNorm1d bn1d(3);
  CHECK_THROWS_WITH_AS(bn1d(zeros({1, 3})), doctest::Contains("more than 1 value per channel"), Error);
  bn1d.eval();
  CHECK_NOTHROW(bn1d(zeros({1, 3})));
}

TEST_CASE("batch_norm passes gradcheck for input, weight and bias in training and in eval") {
  const Tensor running_mean = randn({3}, {DType::f64}, &test::rng());
  const Tensor running_var = rand({3}, {DType::f64}, &test::rng()) + 0.5;
  for (const Shape& shape : {Shape{4, 3}, Shape{3, 3, 5}, Shape{2, 3, 2, 3}}) {
    INFO("shape ", shape_str(shape));
    CHECK_GRADCHECK([](const TensorList& in) { return batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true); },
                    {test::rand_input(shape), test::rand_input({3}), test::rand_input({3})});
    CHECK_GRADCHECK(
        [&](const TensorList& in) { return batch_norm(in[0], in[1], in[2], running_mean, running_var, false); },
        {test::rand_input(shape), test::rand_input({3}), test::rand_input({3})});
  }
  CHECK_GRADCHECK([](const TensorList& in) { return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
                  {test::noncontiguous_input({4, 2, 3})});
}

TEST_CASE("fused batch_norm equals the composite formula on odd shapes and strided inputs, with running stats") {
  const Tensor inputs[] = {
      test::rand_input({5, 3, 7}, -2, 3),
      test::noncontiguous_input({5, 3, 7}, -2, 3),
      test::rand_input({3, 4, 6, 5}, -2, 3).detach().permute({0, 3, 1, 2}).requires_grad_(),  // [3, 5, 4, 6]
      test::rand_input({9, 1}, -2, 3),
  };
  const double momentum = 0.3;
  for (Tensor x : inputs) {
    INFO("input ", shape_str(x.sizes()), " strides ", shape_str(x.strides()));
    const int64_t C = x.size(1);
    const Tensor weight = test::rand_input({C}), bias = test::rand_input({C});
    const Tensor running_mean = randn({C}, {DType::f64}, &test::rng());
    const Tensor running_var = rand({C}, {DType::f64}, &test::rng()) + 0.5;
    const Tensor old_mean = running_mean.clone(), old_var = running_var.clone();

    const Tensor fused = batch_norm(x, weight, bias, running_mean, running_var, true, momentum, kEps);
    const Tensor composite = composite_batch_norm(x, weight, bias, kEps);
    CHECK(test::max_abs_diff(fused, composite) < 1e-12);  // f64, sums of at most a few hundred terms
    const Tensor g = randn(x.sizes(), {DType::f64}, &test::rng());
    const TensorList fused_grads = gradients(fused, g, {x, weight, bias});
    const TensorList composite_grads = gradients(composite, g, {x, weight, bias});
    for (size_t k = 0; k < 3; ++k) CHECK(test::max_abs_diff(fused_grads[k], composite_grads[k]) < 1e-10);

    NoGradGuard no_grad;
    const Shape dims = all_dims_but_channels(x.dim());
    test::check_close(running_mean, test::values(old_mean * (1 - momentum) + x.mean(dims) * momentum), 1e-12);
    test::check_close(running_var, test::values(old_var * (1 - momentum) + x.var(dims, /*unbiased=*/true) * momentum),
                      1e-12);
  }
}

TEST_CASE("fused batch_norm in f32 agrees with f64 to f32 precision") {
  const Tensor x = test::rand_input({6, 4, 5}, -3, 3).detach();
  const Tensor w = test::rand_input({4}).detach(), b = test::rand_input({4}).detach();
  const Tensor in_f64 = batch_norm(x, w, b, Tensor(), Tensor(), true);
  const Tensor in_f32 = batch_norm(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), Tensor(), Tensor(), true);
  CHECK(test::max_abs_diff(in_f32, in_f64) < 1e-5);  // outputs of order 1, f32 rounding ~1e-7 each step
}

TEST_CASE("batch_norm and layer_norm give the same bits on one thread and on two") {
  const Tensor x = randn({16, 8, 32, 32}, {}, &test::rng()).requires_grad_();
  const Tensor w = randn({8}, {}, &test::rng()).requires_grad_(), b = randn({8}, {}, &test::rng()).requires_grad_();
  const Tensor rows = randn({512, 256}, {}, &test::rng()).requires_grad_();
  const Tensor lw = randn({256}, {}, &test::rng()).requires_grad_(),
               lb = randn({256}, {}, &test::rng()).requires_grad_();
  std::vector<std::vector<double>> results[2];
  for (int threads : {1, 2}) {
    test::NumThreadsGuard guard(threads);
    auto& out = results[threads - 1];
    const Tensor y = batch_norm(x, w, b, Tensor(), Tensor(), true);
    out.push_back(test::values(y));
    for (const Tensor& grad : gradients(y, ones_like(y) * y, {x, w, b})) out.push_back(test::values(grad));
    const Tensor z = layer_norm(rows, {256}, lw, lb);
    out.push_back(test::values(z));
    for (const Tensor& grad : gradients(z, z, {rows, lw, lb})) out.push_back(test::values(grad));
  }
  CHECK(results[0] == results[1]);
}

// ---- LayerNorm ----

TEST_CASE("LayerNorm normalises each row over the last dims, then applies weight and bias") {
  nn::LayerNorm norm({4});
  norm.to(DType::f64);
  CHECK(names_of(norm.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  const double s = std::sqrt(1.25 + kEps);  // row 1, 2, 3, 4: mean 2.5, biased var 1.25
  test::check_close(norm(tensor(std::vector<double>{1, 2, 3, 4, 2, 2, 2, 2}, {2, 4})),
                    {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s, 0, 0, 0, 0}, 1e-12);
  assign(norm.weight, {1, 2, 3, 4});
  assign(norm.bias, {0, 0, 0, 1});
  test::check_close(norm(tensor(std::vector<double>{1, 2, 3, 4}, {1, 4})), {-1.5 / s, -1 / s, 1.5 / s, 6 / s + 1},
                    1e-12);
  CHECK(nn::LayerNorm({2, 4}, kEps, false).named_parameters().empty());
}

TEST_CASE("LayerNorm rejects an input that does not end with normalized_shape") {
  nn::LayerNorm norm({3, 4});
  CHECK_THROWS_WITH_AS(norm(zeros({2, 4, 3})),
                       doctest::Contains("input of shape [2, 4, 3] does not end with normalized_shape [3, 4]"), Error);
}

TEST_CASE("layer_norm passes gradcheck over the last one and two dims") {
  CHECK_GRADCHECK([](const TensorList& in) { return layer_norm(in[0], {5}, in[1], in[2]); },
                  {test::rand_input({3, 5}), test::rand_input({5}), test::rand_input({5})});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        return layer_norm(in[0], {3, 4}, in[1], in[2]);
      },
      {test::noncontiguous_input({2, 3, 4}), test::rand_input({3, 4}), test::rand_input({3, 4})});
  CHECK_GRADCHECK([](const TensorList& in) { return layer_norm(in[0], {6}); }, {test::rand_input({2, 2, 6})});
}

TEST_CASE("fused layer_norm equals the composite formula on odd shapes and strided inputs") {
  struct Case {
    Tensor x;
    int64_t normalized_dims;
  };
  const Case cases[] = {
      {test::rand_input({3, 5, 7}, -2, 3), 1},
      {test::rand_input({3, 5, 7}, -2, 3), 2},
      {test::noncontiguous_input({4, 9, 70}, -2, 3), 1},  // more columns than one weight-gradient block
      {test::rand_input({13, 3}, -2, 3), 1},
      {test::rand_input({2, 75, 5}, -2, 3), 1},  // 150 rows: three row blocks of the backward, the last short
  };
  for (const Case& c : cases) {
    INFO("input ", shape_str(c.x.sizes()), " over the last ", c.normalized_dims, " dims");
    const Shape normalized(c.x.sizes().end() - c.normalized_dims, c.x.sizes().end());
    const Tensor weight = test::rand_input(normalized), bias = test::rand_input(normalized);
    const Tensor fused = layer_norm(c.x, normalized, weight, bias);
    const Tensor composite = composite_layer_norm(c.x, c.normalized_dims, weight, bias, kEps);
    CHECK(test::max_abs_diff(fused, composite) < 1e-12);
    const Tensor g = randn(c.x.sizes(), {DType::f64}, &test::rng());
    const TensorList fused_grads = gradients(fused, g, {c.x, weight, bias});
    const TensorList composite_grads = gradients(composite, g, {c.x, weight, bias});
    for (size_t k = 0; k < 3; ++k) CHECK(test::max_abs_diff(fused_grads[k], composite_grads[k]) < 1e-10);
  }
}
