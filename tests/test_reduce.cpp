// Reductions and the softmax family: values against hand-computed expectations, gradients
// against finite differences, the fused softmax kernels against the composite formula, errors.
#include <cmath>
#include <limits>
#include <tuple>

#include "helpers.h"

using namespace sg;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Element-wise comparison with a tolerance; infinities and NaN must match exactly.
void check_values(const Tensor& t, const std::vector<double>& expected, double tolerance) {
  const std::vector<double> actual = test::values(t);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element ", i, ": got ", actual[i], ", expected ", expected[i]);
    if (std::isnan(expected[i])) CHECK(std::isnan(actual[i]));
    else if (std::isinf(expected[i])) CHECK(actual[i] == expected[i]);
    else CHECK(std::abs(actual[i] - expected[i]) <= tolerance);
  }
}

Tensor f32(const std::vector<float>& values, const Shape& shape = {}) { return tensor(values, shape); }
Tensor f64(const std::vector<double>& values, const Shape& shape = {}) { return tensor(values, shape); }

// Inputs of hand-checked tests are small exact numbers, so results are exact up to the last
// bit of f32 (sums of a few such numbers, one division or one sqrt).
constexpr double kExact = 1e-6;

}  // namespace

// ---- sum / mean (kept from the foundation; empty and 0-dim cases) ----

TEST_CASE("sum reduces any dims, keeps them on request, and gives 0 over an empty dim") {
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(x.sum(), {21}, kExact);
  check_values(x.sum({-1}), {6, 15}, kExact);
  CHECK(x.sum({0}, true).sizes() == Shape{1, 3});
  check_values(x.mean({0}), {2.5, 3.5, 4.5}, kExact);
  const Tensor empty_rows = zeros({2, 0});
  check_values(empty_rows.sum({1}), {0, 0}, 0.0);
  check_values(empty_rows.sum(), {0}, 0.0);
}

TEST_CASE("a 0-dim tensor reduces over dim 0 or -1 to itself") {
  const Tensor x = scalar_tensor(3.5);
  check_values(x.sum({0}), {3.5}, 0.0);
  CHECK(x.sum({-1}, true).dim() == 0);
  check_values(x.max(), {3.5}, 0.0);
  const auto [values, indices] = x.max(0);
  check_values(values, {3.5}, 0.0);
  check_values(indices, {0}, 0.0);
  check_values(x.softmax(0), {1}, 0.0);
}

// ---- amax / amin ----

TEST_CASE("amax and amin reduce over one or several dims with keepdim and negative dims") {
  // x[i][j][k] = the values below, shape [2, 2, 3]
  const Tensor x = f32({1, 9, 3, 4, 2, 6, -1, 0, 8, 7, 5, -3}, {2, 2, 3});
  check_values(amax(x), {9}, 0.0);
  check_values(amin(x), {-3}, 0.0);
  check_values(amax(x, {-1}), {9, 6, 8, 7}, 0.0);
  check_values(amin(x, {0, 2}), {-1, -3}, 0.0);
  check_values(amax(x, {2, 0}), {9, 7}, 0.0);
  const Tensor kept = amax(x, {1}, true);
  CHECK(kept.sizes() == Shape{2, 1, 3});
  check_values(kept, {4, 9, 6, 7, 5, 8}, 0.0);
  check_values(x.max(), {9}, 0.0);
  check_values(x.min(), {-3}, 0.0);
}

TEST_CASE("amax and amin split the gradient evenly among tied extrema") {
  Tensor x = f64({1, 3, 3, 2, 0, 0, 5, 1}, {2, 4}).requires_grad_();
  amax(x, {1}).sum().backward();
  check_values(x.grad(), {0, 0.5, 0.5, 0, 0, 0, 1, 0}, 0.0);
  x.set_grad(Tensor());
  amin(x, {1}).sum().backward();
  check_values(x.grad(), {1, 0, 0, 0, 0.5, 0.5, 0, 0}, 0.0);
  x.set_grad(Tensor());
  x.max().backward();
  check_values(x.grad(), {0, 0, 0, 0, 0, 0, 1, 0}, 0.0);
}

TEST_CASE("NaN propagates through amax and is what max and argmax pick") {
  const Tensor x = f32({1, NAN, 3});
  CHECK(std::isnan(amax(x).item()));
  CHECK(std::isnan(amin(x).item()));
  CHECK(argmax(x).item() == 1);
  CHECK(std::isnan(x.max(0).first.item()));
}

// ---- max / min along a dim, argmax / argmin ----

TEST_CASE("max and min along a dim return values and the first index of ties") {
  const Tensor x = f32({1, 3, 3, 2, 2, 0}, {2, 3});
  auto [values, indices] = max(x, 1);
  check_values(values, {3, 2}, 0.0);
  check_values(indices, {1, 0}, 0.0);
  CHECK(indices.dtype() == DType::i64);
  std::tie(values, indices) = min(x, -1, true);
  CHECK(values.sizes() == Shape{2, 1});
  check_values(values, {1, 0}, 0.0);
  check_values(indices, {0, 2}, 0.0);
  std::tie(values, indices) = x.max(-2);
  check_values(values, {2, 3, 3}, 0.0);
  check_values(indices, {1, 0, 0}, 0.0);
}

TEST_CASE("max along a dim sends the whole gradient to the returned index") {
  Tensor x = f64({3, 1, 3, 0, 4, 4}, {2, 3}).requires_grad_();
  const auto [values, indices] = x.max(1);
  (values * f64({10, 100})).sum().backward();
  check_values(x.grad(), {10, 0, 0, 0, 100, 0}, 0.0);
  x.set_grad(Tensor());
  x.min(0, true).first.sum().backward();
  check_values(x.grad(), {0, 1, 1, 1, 0, 0}, 0.0);
}

TEST_CASE("argmax and argmin work over the flattened tensor or along one dim") {
  const Tensor x = f32({1, 7, 7, 7, 0, 2}, {2, 3});
  CHECK(argmax(x).item() == 1);
  CHECK(argmin(x).item() == 4);
  CHECK(argmax(x).dim() == 0);
  CHECK(x.argmax(std::nullopt, true).sizes() == Shape{1, 1});
  check_values(argmax(x, 0), {1, 0, 0}, 0.0);
  check_values(x.argmin(-1), {0, 1}, 0.0);
  CHECK(argmax(x, 1, true).sizes() == Shape{2, 1});
  CHECK(!argmax(x.detach().to(DType::f64).requires_grad_()).requires_grad());
}

TEST_CASE("max, min and argmax work on integer tensors and keep their dtype") {
  const Tensor x = tensor(std::vector<int64_t>{5, -2, 9, 9, 0, -7}, {2, 3});
  CHECK(amax(x).dtype() == DType::i64);
  check_values(amax(x), {9}, 0.0);
  check_values(amin(x, {1}), {-2, -7}, 0.0);
  const auto [values, indices] = x.max(1);
  check_values(values, {9, 9}, 0.0);
  check_values(indices, {2, 0}, 0.0);
  check_values(argmin(x.to(DType::i32)), {5}, 0.0);
  check_values(tensor(std::vector<uint8_t>{3, 200, 7}).max(), {200}, 0.0);
}

// ---- var ----

TEST_CASE("var is unbiased by default, biased on request, over any dims") {
  const Tensor x = f32({1, 2, 3, 4});
  check_values(x.var(), {5.0 / 3.0}, kExact);
  check_values(x.var({}, false), {1.25}, kExact);
  // rows [1, 2, 3] and [4, 8, 12]: means 2 and 8, squared deviations 2 and 32
  const Tensor y = f32({1, 2, 3, 4, 8, 12}, {2, 3});
  check_values(y.var({1}), {1, 16}, kExact);
  check_values(y.var({-1}, false, true), {2.0 / 3.0, 32.0 / 3.0}, kExact);
  CHECK(y.var({1}, true, true).sizes() == Shape{2, 1});
  check_values(y.var({0}), {4.5, 18, 40.5}, kExact);
  // all six values: mean 5, sum of squares 238, squared deviations 238 - 6 * 25 = 88
  check_values(var(y.reshape({2, 1, 3}), {0, 2}), {88.0 / 5}, 1e-5);
  CHECK(std::isnan(f32({1}).var().item()));  // one element, unbiased: 0/0, as PyTorch
}

TEST_CASE("var stays exact for values far from zero") {
  // E[x^2] - E[x]^2 in double would lose everything here (x^2 ~ 1e18, spacing ~ 128).
  const Tensor x = f64({1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4});
  check_values(x.var(), {5.0 / 3.0}, 1e-12);
  // f32 input: accumulated in double, so 4 values around 1e4 keep their small variance.
  check_values(f32({10001, 10002, 10003, 10004}).var(), {5.0 / 3.0}, kExact);
}

// ---- norm ----

TEST_CASE("norm computes p = 1, 2, 3, 0.5 and inf over dims") {
  const Tensor x = f32({3, -4});
  check_values(x.norm(), {5}, kExact);
  check_values(x.norm(1), {7}, kExact);
  check_values(x.norm(3), {std::cbrt(27.0 + 64.0)}, kExact);
  check_values(x.norm(0.5), {std::pow(std::sqrt(3.0) + 2.0, 2.0)}, 1e-5);
  check_values(x.norm(kInf), {4}, 0.0);
  const Tensor y = f32({3, 4, 0, -6, 8, 0}, {2, 3});
  check_values(y.norm(2, {1}), {5, 10}, kExact);
  check_values(y.norm(kInf, {0}, true), {6, 8, 0}, 0.0);
  CHECK(y.norm(kInf, {0}, true).sizes() == Shape{1, 3});
  check_values(norm(y, 1, {-2, -1}), {21}, kExact);
}

TEST_CASE("norm's gradient is zero, not NaN, at the zero vector") {
  for (double p : {0.5, 1.0, 2.0, 3.0, kInf}) {
    INFO("p = ", p);
    Tensor x = zeros({2, 3}, {DType::f64}).requires_grad_();
    x.norm(p, {1}).sum().backward();
    check_values(x.grad(), {0, 0, 0, 0, 0, 0}, 0.0);
  }
}

TEST_CASE("norm's gradient is x / |x| for p = 2 and splits ties for p = inf") {
  Tensor x = f64({3, -4}).requires_grad_();
  x.norm().backward();
  check_values(x.grad(), {0.6, -0.8}, 1e-15);
  Tensor y = f64({-2, 1, 2}).requires_grad_();
  y.norm(kInf).backward();
  check_values(y.grad(), {-0.5, 0, 0.5}, 0.0);
}

// ---- logsumexp ----

TEST_CASE("logsumexp is stable for large values and handles rows of -inf and +inf") {
  const Tensor x =
      f32({1000, 1000, -INFINITY, -INFINITY, 0, static_cast<float>(std::log(3.0)), INFINITY, 1, -1000, -1000}, {5, 2});
  check_values(x.logsumexp({1}), {1000 + std::log(2.0), -kInf, std::log(4.0), kInf, -1000 + std::log(2.0)}, 1e-4);
  CHECK(x.logsumexp({-1}, true).sizes() == Shape{5, 1});
  const Tensor y = f64({0, 1, 2, 3, 4, 5}, {2, 1, 3});
  const double all =
      std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0) + std::exp(5.0));
  check_values(logsumexp(y, {0, 2}), {all}, 1e-12);
  check_values(logsumexp(y, {}), {all}, 1e-12);
  check_values(
      logsumexp(y, {0}, true),
      {std::log(1 + std::exp(3.0)), std::log(std::exp(1.0) + std::exp(4.0)), std::log(std::exp(2.0) + std::exp(5.0))},
      1e-12);
}

// ---- softmax / log_softmax ----

TEST_CASE("softmax and log_softmax are stable where exp(x) overflows") {
  const Tensor x = f32({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  // softmax([0, 1, 2]) = e^k / (1 + e + e^2)
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  check_values(x.softmax(1), {1 / z, std::exp(1.0) / z, std::exp(2.0) / z, std::exp(2.0) / z, std::exp(1.0) / z, 1 / z},
               kExact);
  check_values(x.log_softmax(-1),
               {-std::log(z), 1 - std::log(z), 2 - std::log(z), 2 - std::log(z), 1 - std::log(z), -std::log(z)}, 1e-5);
  // Along dim 0 each column is (1000 + k, -1000 - k): the positive entry takes everything.
  check_values(x.softmax(0), {1, 1, 1, 0, 0, 0}, 0.0);
}

TEST_CASE("softmax gives 0 at -inf and NaN for a row of only -inf, as PyTorch") {
  const Tensor x = f32({-INFINITY, 0, 0, -INFINITY, -INFINITY, -INFINITY}, {2, 3});
  check_values(x.softmax(1), {0, 0.5, 0.5, kNaN, kNaN, kNaN}, kExact);
  check_values(x.log_softmax(1), {-kInf, -std::log(2.0), -std::log(2.0), kNaN, kNaN, kNaN}, kExact);
}

namespace {
// The unfused definitions the fused kernels must agree with.
Tensor composite_softmax(const Tensor& x, int64_t dim) {
  const Tensor e = exp(x - amax(x, {dim}, true).detach());
  return e / e.sum({dim}, true);
}
Tensor composite_log_softmax(const Tensor& x, int64_t dim) {
  const Tensor shifted = x - amax(x, {dim}, true).detach();
  return shifted - log(exp(shifted).sum({dim}, true));
}

// Inputs of several layouts: contiguous, transposed, sliced with a step, and a 0-dim tensor.
// Sizes are odd and straddle the kernels' 16-column groups.
std::vector<Tensor> layout_cases(DType dtype) {
  const auto make = [&](const Shape& shape) { return rand(shape, {dtype}, &test::rng()) * 8.0 - 4.0; };
  return {make({37}),
          make({3, 17, 5}),
          make({2, 5, 40}),
          make({4, 33}).transpose(0, 1),
          make({6, 9, 35}).slice(2, 1, 35, 3).slice(0, 0, 6, 2),
          make({})};
}
}  // namespace

TEST_CASE("fused softmax kernels match the composite formula on any dim and layout, forward and backward") {
  for (const Tensor& base : layout_cases(DType::f64)) {
    for (int64_t dim = -std::max<int64_t>(base.dim(), 1); dim < std::max<int64_t>(base.dim(), 1); ++dim) {
      INFO("shape ", shape_str(base.sizes()), ", dim ", dim);
      Tensor x = base.detach().requires_grad_();
      Tensor x_ref = base.detach().requires_grad_();
      const Tensor weights = randn(x.sizes(), {DType::f64}, &test::rng());
      // f64 on both sides: only the rounding order differs (values and gradients are O(10)).
      const Tensor y = softmax(x, dim), y_ref = composite_softmax(x_ref, dim);
      CHECK(test::max_abs_diff(y, y_ref) < 1e-12);
      (y * weights).sum().backward();
      (y_ref * weights).sum().backward();
      CHECK(test::max_abs_diff(x.grad(), x_ref.grad()) < 1e-12);

      x.set_grad(Tensor());
      x_ref.set_grad(Tensor());
      const Tensor l = log_softmax(x, dim), l_ref = composite_log_softmax(x_ref, dim);
      CHECK(test::max_abs_diff(l, l_ref) < 1e-12);
      (l * weights).sum().backward();
      (l_ref * weights).sum().backward();
      CHECK(test::max_abs_diff(x.grad(), x_ref.grad()) < 1e-12);
    }
  }
}

TEST_CASE("f32 softmax matches the f64 composite formula to f32 rounding") {
  for (const Tensor& x : layout_cases(DType::f32)) {
    const int64_t dim = x.dim() == 0 ? 0 : x.dim() - 1;
    INFO("shape ", shape_str(x.sizes()));
    // float accumulation over <= 40 terms: a few ulps of 1.
    CHECK(test::max_abs_diff(softmax(x, dim), composite_softmax(x.to(DType::f64), dim)) < 1e-6);
    CHECK(test::max_abs_diff(log_softmax(x, 0), composite_log_softmax(x.to(DType::f64), 0)) < 1e-5);
  }
}

// ---- low precision ----

TEST_CASE("f16 softmax computes in float and rounds once") {
  const Tensor x = (rand({3, 50}, {}, &test::rng()) * 20.0 - 10.0).to(DType::f16);
  const Tensor y = softmax(x, 1);
  CHECK(y.dtype() == DType::f16);
  // The f32 kernel runs the same float math, so rounding its result gives identical bits.
  CHECK(test::values(y) == test::values(softmax(x.to(DType::f32), 1).to(DType::f16)));
  CHECK(test::values(log_softmax(x, 0)) == test::values(log_softmax(x.to(DType::f32), 0).to(DType::f16)));
}

TEST_CASE("f16 and bf16 reductions accumulate in high precision and round once") {
  // An f16 running sum of ones sticks at 2048 (2049 is not representable); 4096 is exact.
  const Tensor ones_f16 = ones({4096}, {DType::f16});
  CHECK(ones_f16.sum().item() == 4096);
  CHECK(ones_f16.sum().dtype() == DType::f16);
  CHECK(ones_f16.norm().item() == 64);
  CHECK(ones({4096}, {DType::bf16}).norm().item() == 64);
  CHECK(ones({4096}, {DType::bf16}).logsumexp({0}).item() == doctest::Approx(1 + std::log(4096.0)).epsilon(1e-2));
  // var of f16 values 1..4: exact in double, then one rounding to f16 (5/3 -> 1.6669921875)
  CHECK(f32({1, 2, 3, 4}).to(DType::f16).var().item() == 1.6669921875);
  check_values(amax(f32({1, 5, 5, -2}).to(DType::f16)), {5}, 0.0);
}

// ---- determinism ----

TEST_CASE("reductions give the same bits for any thread count") {
  const Tensor x = randn({3, 100003}, {}, &test::rng());
  const auto run_all = [&] {
    return std::vector<std::vector<double>>{test::values(x.sum({1})),     test::values(x.var({1})),
                                            test::values(x.norm(3, {1})), test::values(x.logsumexp({1})),
                                            test::values(x.argmax(1)),    test::values(x.sum()),
                                            test::values(x.softmax(1)),   test::values(x.softmax(0))};
  };
  const int threads = get_num_threads();
  set_num_threads(1);
  const auto one_thread = run_all();
  set_num_threads(4);  // more threads than rows: long rows split into blocks
  const auto four_threads = run_all();
  set_num_threads(threads);
  CHECK(one_thread == four_threads);
}

// ---- gradients ----

TEST_CASE("gradcheck: amax and amin over one or several dims, on contiguous and strided views") {
  const Tensor x = test::rand_input({3, 4, 5});
  CHECK_GRADCHECK([](const TensorList& in) { return amax(in[0], {1}); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return amin(in[0], {0, 2}, true); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return amax(in[0].transpose(0, 2), {-1}); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return amin(in[0].slice(2, 0, 5, 2), {}); }, {x});
}

TEST_CASE("gradcheck: max and min along a dim, on contiguous and strided views") {
  const Tensor x = test::rand_input({4, 6});
  CHECK_GRADCHECK([](const TensorList& in) { return max(in[0], 1).first; }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return min(in[0], 0, true).first; }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].t().max(-1).first; }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].slice(1, 1, 6, 2).min(1).first; }, {x});
}

TEST_CASE("gradcheck: var over one or several dims, biased and unbiased, on strided views") {
  const Tensor x = test::rand_input({3, 4, 5});
  CHECK_GRADCHECK([](const TensorList& in) { return var(in[0]); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return var(in[0], {0, 2}, false, true); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return var(in[0].transpose(1, 2), {-1}); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return var(in[0].slice(0, 0, 3, 2), {1}, false); }, {x});
}

TEST_CASE("gradcheck: norm for several p over one or several dims, on strided views") {
  const Tensor x = test::rand_input({3, 4, 5});
  for (double p : {0.5, 1.0, 2.0, 3.0, kInf}) {
    INFO("p = ", p);
    CHECK_GRADCHECK([p](const TensorList& in) { return norm(in[0], p); }, {x});
    CHECK_GRADCHECK([p](const TensorList& in) { return norm(in[0], p, {0, 2}, true); }, {x});
    CHECK_GRADCHECK([p](const TensorList& in) { return norm(in[0].transpose(0, 1), p, {-1}); }, {x});
  }
}

TEST_CASE("gradcheck: logsumexp over one or several dims, on strided views") {
  const Tensor x = test::rand_input({3, 4, 5}, -3.0, 3.0);
  CHECK_GRADCHECK([](const TensorList& in) { return logsumexp(in[0], {1}); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return logsumexp(in[0], {0, -1}, true); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return logsumexp(in[0].transpose(0, 2).slice(1, 0, 4, 3), {0}); }, {x});
}

TEST_CASE("gradcheck: softmax and log_softmax along every dim, on strided views") {
  const Tensor x = test::rand_input({3, 4, 5}, -3.0, 3.0);
  for (int64_t dim : {0, 1, -1}) {
    INFO("dim ", dim);
    CHECK_GRADCHECK([dim](const TensorList& in) { return softmax(in[0], dim); }, {x});
    CHECK_GRADCHECK([dim](const TensorList& in) { return log_softmax(in[0], dim); }, {x});
    CHECK_GRADCHECK([dim](const TensorList& in) { return softmax(in[0].transpose(0, 2), dim); }, {x});
    CHECK_GRADCHECK([dim](const TensorList& in) { return log_softmax(in[0].slice(2, 0, 5, 2), dim); }, {x});
    // Gradients that reach the kernels strided (transposed) and broadcast (stride 0).
    CHECK_GRADCHECK([dim](const TensorList& in) { return softmax(in[0], dim).transpose(0, 2); }, {x});
    CHECK_GRADCHECK([dim](const TensorList& in) { return log_softmax(in[0], dim).sum({1}); }, {x});
  }
}

TEST_CASE("f16 softmax backward computes in float") {
  const Tensor base = rand({4, 30}, {}, &test::rng()) * 6.0 - 3.0;
  const Tensor weights = randn({4, 30}, {}, &test::rng());
  for (int64_t dim : {0, 1}) {
    Tensor x16 = base.to(DType::f16).requires_grad_(), x32 = base.to(DType::f16).to(DType::f32).requires_grad_();
    (softmax(x16, dim) * weights.to(DType::f16)).sum().backward();
    (softmax(x32, dim) * weights.to(DType::f16).to(DType::f32)).sum().backward();
    CHECK(x16.grad().dtype() == DType::f16);
    // Differences come from rounding y and g to f16 (relative 2^-11) on gradients of size <= ~3.
    CHECK(test::max_abs_diff(x16.grad(), x32.grad()) < 5e-3);
  }
}

// ---- errors ----

TEST_CASE("reductions reject bad dims naming the op") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH_AS(x.sum({2}), doctest::Contains("sum: dim 2 out of range"), sg::Error);
  CHECK_THROWS_WITH_AS(amax(x, {0, -2}), doctest::Contains("amax: dim repeated"), sg::Error);
  CHECK_THROWS_WITH_AS(x.max(-3), doctest::Contains("max: dim -3 out of range"), sg::Error);
  CHECK_THROWS_WITH_AS(x.argmin(5), doctest::Contains("argmin"), sg::Error);
  CHECK_THROWS_WITH_AS(x.softmax(2), doctest::Contains("softmax: dim 2 out of range"), sg::Error);
  CHECK_THROWS_WITH_AS(x.logsumexp({7}), doctest::Contains("logsumexp"), sg::Error);
  CHECK_THROWS_WITH_AS(x.norm(0.0), doctest::Contains("norm: p must be positive"), sg::Error);
  CHECK_THROWS_WITH_AS(x.norm(-kInf), doctest::Contains("norm: p must be positive"), sg::Error);
}

TEST_CASE("var, norm, softmax, log_softmax and logsumexp require a floating tensor") {
  const Tensor x = tensor(std::vector<int64_t>{1, 2, 3});
  CHECK_THROWS_WITH_AS(x.var(), doctest::Contains("var: expected a floating tensor, got i64 of shape [3]"), sg::Error);
  CHECK_THROWS_WITH_AS(x.norm(), doctest::Contains("norm: expected a floating tensor"), sg::Error);
  CHECK_THROWS_WITH_AS(x.softmax(0), doctest::Contains("softmax: expected a floating tensor"), sg::Error);
  CHECK_THROWS_WITH_AS(x.log_softmax(0), doctest::Contains("log_softmax: expected a floating tensor"), sg::Error);
  CHECK_THROWS_WITH_AS(x.logsumexp({0}), doctest::Contains("logsumexp: expected a floating tensor"), sg::Error);
}

TEST_CASE("max, min and argmax of an empty dim throw naming the op and the shape") {
  const Tensor x = zeros({2, 0});
  CHECK_THROWS_WITH_AS(x.max(), doctest::Contains("max: cannot reduce dim 1 of size 0 (input shape [2, 0])"),
                       sg::Error);
  CHECK_THROWS_WITH_AS(amin(x, {1}), doctest::Contains("amin: cannot reduce dim 1 of size 0"), sg::Error);
  CHECK_THROWS_WITH_AS(x.max(1), doctest::Contains("max: cannot reduce dim 1"), sg::Error);
  CHECK_THROWS_WITH_AS(x.argmax(), doctest::Contains("argmax: cannot reduce dim 1 of size 0 (input shape [2, 0])"),
                       sg::Error);
  CHECK_THROWS_WITH_AS(x.argmin(-1), doctest::Contains("argmin"), sg::Error);
  // Reducing the non-empty dim is fine: one result per (absent) row.
  CHECK(amax(x, {0}).sizes() == Shape{0});
}
