// Pointwise ops and sum/mean: values against formulas computed here in double, broadcasting,
// scalar operands, dtype promotion, in-place variants, NaN rules, gradients, and the strided
// loop's fast paths and threads against its general path.
#include <algorithm>
#include <cmath>
#include <functional>

#include "helpers.h"

using namespace sg;

namespace {

using TensorFn = std::function<Tensor(const TensorList&)>;

Tensor f64(const std::vector<double>& values, const Shape& shape = {}) { return tensor(values, shape); }
Tensor f32(const std::vector<float>& values, const Shape& shape = {}) { return tensor(values, shape); }

// Checks `got` against reference(x) element by element; `tolerance` is relative to max(1, |ref|).
void check_elementwise(const Tensor& got, const std::vector<double>& inputs, double (*reference)(double),
                       double tolerance) {
  const auto values = test::values(got);
  REQUIRE(values.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("x = ", inputs[i]);
    const double expected = reference(inputs[i]);
    CHECK(std::abs(values[i] - expected) <= tolerance * std::max(1.0, std::abs(expected)));
  }
}

double gelu_erf_reference(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_reference(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// The same values laid out four ways: contiguous, transposed memory, every other element of a
// larger buffer, and (for the second operand) broadcast from fewer dims.
Tensor transposed_copy(const Tensor& t) { return t.transpose(0, -1).contiguous().transpose(0, -1); }
Tensor strided_copy(const Tensor& t) {
  Shape wide_shape = t.sizes();
  wide_shape.back() *= 2;
  Tensor every_other = zeros(wide_shape, {t.dtype()}).slice(-1, 0, wide_shape.back(), 2);
  every_other.copy_(t);
  return every_other;
}

}  // namespace

// ---- values ----

TEST_CASE("binary arithmetic broadcasts and matches the formulas") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f64({10, -20, 0.5});
  CHECK(test::values(a + b) == std::vector<double>{11, -18, 3.5, 14, -15, 6.5});
  CHECK(test::values(a - b) == std::vector<double>{-9, 22, 2.5, -6, 25, 5.5});
  CHECK(test::values(a * b) == std::vector<double>{10, -40, 1.5, 40, -100, 3});
  CHECK(test::values(a / b) == std::vector<double>{0.1, -0.1, 6, 0.4, -0.25, 12});
  CHECK(test::values(add(a, b, 2.0)) == std::vector<double>{21, -38, 4, 24, -35, 7});
  CHECK(test::values(sub(a, b, 0.5)) == std::vector<double>{-4, 12, 2.75, -1, 15, 5.75});
  CHECK(test::values(pow(a, f64({2, 0.5, -1}))) ==
        std::vector<double>{1, std::sqrt(2.0), 1.0 / 3, 16, std::sqrt(5.0), 1.0 / 6});
  // A column broadcast against a row gives the outer grid.
  const Tensor column = f64({1, 2}, {2, 1});
  CHECK((column * b).sizes() == Shape{2, 3});
  CHECK(test::values(column * b) == std::vector<double>{10, -20, 0.5, 20, -40, 1});
}

TEST_CASE("scalar operands work on either side") {
  const Tensor x = f64({1, 2, 4});
  CHECK(test::values(x + 2.0) == std::vector<double>{3, 4, 6});
  CHECK(test::values(2.0 + x) == std::vector<double>{3, 4, 6});
  CHECK(test::values(x - 1.0) == std::vector<double>{0, 1, 3});
  CHECK(test::values(1.0 - x) == std::vector<double>{0, -1, -3});
  CHECK(test::values(x * 0.5) == std::vector<double>{0.5, 1, 2});
  CHECK(test::values(3.0 * x) == std::vector<double>{3, 6, 12});
  CHECK(test::values(x / 4.0) == std::vector<double>{0.25, 0.5, 1});
  CHECK(test::values(4.0 / x) == std::vector<double>{4, 2, 1});
  CHECK(test::values(x.pow(2.0)) == std::vector<double>{1, 4, 16});
  CHECK(test::values(pow(2.0, x)) == std::vector<double>{2, 4, 16});
  CHECK(test::values(-x) == std::vector<double>{-1, -2, -4});
}

TEST_CASE("unary ops match their formulas") {
  const std::vector<double> inputs{-3.5, -1, -0.25, 0, 0.3, 1, 2.75};
  const Tensor x = f64(inputs);
  check_elementwise(
      x.neg(), inputs, [](double v) { return -v; }, 0);
  check_elementwise(
      x.exp(), inputs, [](double v) { return std::exp(v); }, 1e-15);
  check_elementwise(
      x.abs(), inputs, [](double v) { return std::abs(v); }, 0);
  check_elementwise(
      x.tanh(), inputs, [](double v) { return std::tanh(v); }, 1e-15);
  check_elementwise(
      x.sigmoid(), inputs, [](double v) { return 1 / (1 + std::exp(-v)); }, 1e-15);
  check_elementwise(
      x.relu(), inputs, [](double v) { return v > 0 ? v : 0.0; }, 0);
  check_elementwise(x.gelu(), inputs, gelu_erf_reference, 1e-15);
  check_elementwise(x.gelu(true), inputs, gelu_tanh_reference, 1e-15);
  const std::vector<double> positive{0.01, 0.5, 1, 4, 100};
  const Tensor p = f64(positive);
  check_elementwise(
      p.log(), positive, [](double v) { return std::log(v); }, 1e-15);
  check_elementwise(
      p.sqrt(), positive, [](double v) { return std::sqrt(v); }, 1e-15);
  check_elementwise(
      p.rsqrt(), positive, [](double v) { return 1 / std::sqrt(v); }, 1e-15);
  // In f32 the same formulas hold to f32 precision.
  check_elementwise(x.to(DType::f32).gelu(), inputs, gelu_erf_reference, 1e-6);
  check_elementwise(
      x.to(DType::f32).sigmoid(), inputs, [](double v) { return 1 / (1 + std::exp(-v)); }, 1e-6);
}

TEST_CASE("gelu matches published values of both forms") {
  CHECK(f64({1.0}).gelu().item() == doctest::Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(f64({-1.0}).gelu().item() == doctest::Approx(-0.15865525393145707).epsilon(1e-15));
  CHECK(f64({1.0}).gelu(true).item() == doctest::Approx(0.8411919906082768).epsilon(1e-15));
  CHECK(f32({1.0f}).gelu().item() == doctest::Approx(0.8413447460685429).epsilon(1e-7));
}

TEST_CASE("f32 and bf16 GELU and its gradient follow the f64 formulas densely from -10 to 10, on every layout") {
  // f32 computes erf and exp with the branch-free polynomials (core/simd_math.h, within 1.5 ulp);
  // f64 keeps the C library's (the tests above hold it to 1e-15).
  std::vector<double> inputs;  // 20099 points, not on a grid
  for (int i = 0; i < 101 * 199; ++i) inputs.push_back(-10.0 + 20.0 * i / (101 * 199 - 1) + 1e-4 * std::sin(i));
  const Tensor x = tensor(inputs, {101, 199}).to(DType::f32);
  const Tensor grad = rand({101, 199}, {}, &test::rng()) * 2.0 - 1.0;
  const size_t count = inputs.size();
  auto derivative = [](double v) {
    return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    CAPTURE(dtype);
    const Tensor typed_x = x.to(dtype), typed_grad = grad.to(dtype);
    const Tensor forward = typed_x.gelu();
    // The gradient through autograd (GeluBackward runs the gelu_erf_backward kernel), from a
    // contiguous input and from a strided one.
    auto gradient_of = [&](const Tensor& input) {
      Tensor leaf = input.detach().requires_grad_();
      leaf.gelu().backward(typed_grad);
      return test::values(leaf.grad());
    };
    const auto b = gradient_of(typed_x);
    // Each result is rounded once from f32 math that is good to a few f32 ulps of its largest
    // term: 1e-6 relative to max(1, |value|) in f32, half a bf16 ulp plus that in bf16.
    const double tolerance = dtype == DType::f32 ? 1e-6 : std::ldexp(1.0, -8);
    const auto f = test::values(forward);
    const auto typed_xv = test::values(typed_x), typed_gv = test::values(typed_grad);
    int forward_misses = 0, backward_misses = 0;
    for (size_t i = 0; i < count; ++i) {
      const double expected_f = gelu_erf_reference(typed_xv[i]);
      const double expected_b = typed_gv[i] * derivative(typed_xv[i]);
      forward_misses += std::abs(f[i] - expected_f) > tolerance * std::max(1.0, std::abs(expected_f));
      backward_misses += std::abs(b[i] - expected_b) > tolerance * std::max(1.0, std::abs(expected_b));
    }
    CHECK(forward_misses == 0);
    CHECK(backward_misses == 0);
    // The strided loops call the same function as the vectorised contiguous one: the same bits.
    CHECK(test::values(transposed_copy(typed_x).gelu()) == f);
    CHECK(test::values(strided_copy(typed_x).gelu()) == f);
    CHECK(gradient_of(strided_copy(typed_x)) == b);
  }
}

TEST_CASE("sigmoid and exp stay finite where a naive formula would not") {
  const auto s = test::values(f32({-100.f, 100.f}).sigmoid());
  CHECK(s[0] >= 0.0);
  CHECK(s[0] < 1e-40);
  CHECK(s[1] == 1.0);
  CHECK(std::isinf(test::values(f32({100.f}).exp())[0]));
}

TEST_CASE("clamp limits values, keeps NaN, and with min > max gives max as PyTorch does") {
  const Tensor x = f64({-2, -0.5, 0.5, 2, NAN});
  auto v = test::values(x.clamp(-1.0, 1.0));
  CHECK(std::vector<double>(v.begin(), v.begin() + 4) == std::vector<double>{-1, -0.5, 0.5, 1});
  CHECK(std::isnan(v[4]));
  v = test::values(x.clamp(0.0, std::nullopt));
  CHECK(std::vector<double>(v.begin(), v.begin() + 4) == std::vector<double>{0, 0, 0.5, 2});
  v = test::values(x.clamp(std::nullopt, 0.0));
  CHECK(std::vector<double>(v.begin(), v.begin() + 4) == std::vector<double>{-2, -0.5, 0, 0});
  v = test::values(x.clamp(1.0, -1.0));  // torch.clamp(x, min=1, max=-1) is -1 everywhere (but NaN)
  CHECK(std::vector<double>(v.begin(), v.begin() + 4) == std::vector<double>{-1, -1, -1, -1});
  CHECK(test::values(arange(5).clamp(1, 3)) == std::vector<double>{1, 1, 2, 3, 3});
}

TEST_CASE("maximum and minimum broadcast and propagate NaN from either side") {
  const Tensor a = f64({1, 5, NAN, 2}, {2, 2});
  const Tensor b = f64({3, NAN});
  const auto hi = test::values(maximum(a, b)), lo = test::values(minimum(a, b));
  CHECK(hi[0] == 3);
  CHECK(std::isnan(hi[1]));
  CHECK(std::isnan(hi[2]));
  CHECK(std::isnan(hi[3]));
  CHECK(lo[0] == 1);
  CHECK(std::isnan(lo[1]));
  CHECK(test::values(maximum(f64({1, 5}), f64({3}))) == std::vector<double>{3, 5});
  CHECK(test::values(minimum(f64({1, 5}), f64({3}))) == std::vector<double>{1, 3});
}

TEST_CASE("comparisons give bool tensors and broadcast") {
  const Tensor a = f64({1, 2, 3});
  const Tensor b = f64({2, 2}, {2, 1});
  CHECK(a.lt(b).dtype() == DType::boolean);
  CHECK(test::values(a.lt(b)) == std::vector<double>{1, 0, 0, 1, 0, 0});
  CHECK(test::values(a.le(b)) == std::vector<double>{1, 1, 0, 1, 1, 0});
  CHECK(test::values(a.gt(b)) == std::vector<double>{0, 0, 1, 0, 0, 1});
  CHECK(test::values(a.ge(b)) == std::vector<double>{0, 1, 1, 0, 1, 1});
  CHECK(test::values(a.eq(b)) == std::vector<double>{0, 1, 0, 0, 1, 0});
  CHECK(test::values(a.ne(b)) == std::vector<double>{1, 0, 1, 1, 0, 1});
  CHECK(test::values(gt(a, 1.5)) == std::vector<double>{0, 1, 1});
  CHECK(test::values(eq(arange(3), 1.0)) == std::vector<double>{0, 1, 0});
  CHECK(test::values(eq(f64({NAN}), f64({NAN}))) == std::vector<double>{0});
  const Tensor t = tensor(std::vector<bool>{true, false});
  CHECK(test::values(t.eq(tensor(std::vector<bool>{true, true}))) == std::vector<double>{1, 0});
}

TEST_CASE("where and masked_fill select by a broadcast condition") {
  const Tensor condition = tensor(std::vector<bool>{true, false}, {2, 1});
  const Tensor a = f64({1, 2, 3});
  CHECK(test::values(where(condition, a, f64({-1}))) == std::vector<double>{1, 2, 3, -1, -1, -1});
  CHECK(test::values(where(condition, a, 7.0)) == std::vector<double>{1, 2, 3, 7, 7, 7});
  CHECK(where(condition, a.to(DType::f32), f64({0})).dtype() == DType::f64);
  const Tensor x = arange(6, {DType::f32}).reshape({2, 3});
  const Tensor mask = tensor(std::vector<bool>{false, true, false});
  CHECK(test::values(x.masked_fill(mask, -9)) == std::vector<double>{0, -9, 2, 3, -9, 5});
  // masked_fill keeps the tensor's dtype, converting the value (as torch.masked_fill).
  const Tensor filled = arange(3).masked_fill(tensor(std::vector<bool>{true, false, false}), 2.5);
  CHECK(filled.dtype() == DType::i64);
  CHECK(test::values(filled) == std::vector<double>{2, 1, 2});
  CHECK_THROWS_WITH_AS(x.masked_fill(tensor(std::vector<bool>{true, false}, {2, 1, 1}), 0),
                       "masked_fill: mask of shape [2, 1, 1] does not broadcast to the tensor's shape [2, 3]", Error);
  CHECK_THROWS_WITH_AS(where(a, a, a), "where: condition must be bool, got f64", Error);
}

TEST_CASE("binary ops promote dtypes as PyTorch does") {
  const Tensor i = arange(1, 4);  // i64 1, 2, 3
  CHECK((f32({1}) + f64({1})).dtype() == DType::f64);
  CHECK((i + f32({0.5})).dtype() == DType::f32);
  CHECK(test::values(i + f32({0.5})) == std::vector<double>{1.5, 2.5, 3.5});
  CHECK((i + tensor(std::vector<int32_t>{1})).dtype() == DType::i64);
  CHECK((tensor(std::vector<uint8_t>{200}) + tensor(std::vector<int32_t>{100})).item<int64_t>() == 300);
  CHECK((zeros({1}, {DType::f16}) + zeros({1}, {DType::bf16})).dtype() == DType::f32);
  CHECK((zeros({1}, {DType::f16}) * 0.5).dtype() == DType::f16);  // a double scalar keeps a float tensor's dtype
  // Integer division is true division in f32.
  const Tensor quotient = f64({7, -7}).to(DType::i64) / tensor(std::vector<int64_t>{2});
  CHECK(quotient.dtype() == DType::f32);
  CHECK(test::values(quotient) == std::vector<double>{3.5, -3.5});
  CHECK(test::values(arange(3) / 2.0) == std::vector<double>{0, 0.5, 1});
  // An integral scalar keeps an integer tensor integral; a fractional one makes it f32.
  CHECK((i * 2.0).dtype() == DType::i64);
  CHECK((i * 2.5).dtype() == DType::f32);
  CHECK(test::values(i * 2.5) == std::vector<double>{2.5, 5, 7.5});
  // So does a fractional exponent.
  CHECK(i.pow(2.0).dtype() == DType::i64);
  CHECK(test::values(i.pow(2.0)) == std::vector<double>{1, 4, 9});
  CHECK(i.pow(0.5).dtype() == DType::f32);
  const auto roots = test::values(i.pow(0.5));
  for (int k = 0; k < 3; ++k) CHECK(roots[k] == doctest::Approx(std::sqrt(k + 1.0)).epsilon(1e-6));  // f32 precision
}

TEST_CASE("incompatible broadcasts throw naming the op and both shapes") {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_WITH_AS(a + b, "add: shapes [2, 3] and [4] cannot be broadcast (dim 1: 3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(a * b, "mul: shapes [2, 3] and [4] cannot be broadcast (dim 1: 3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(maximum(zeros({5, 2}), zeros({3, 1, 4})),
                       "maximum: shapes [5, 2] and [3, 1, 4] cannot be broadcast (dim 2: 2 vs 4)", Error);
  CHECK_THROWS_WITH_AS(a.lt(b), "lt: shapes [2, 3] and [4] cannot be broadcast (dim 1: 3 vs 4)", Error);
  Tensor small = zeros({3});
  CHECK_THROWS_WITH_AS(small.add_(a),
                       "add_: the result of shape [2, 3] cannot be written in place into a tensor of shape [3]", Error);
  CHECK_THROWS_WITH_AS(arange(3).exp(), "exp: expected a floating tensor, got i64", Error);
}

// ---- in place ----

TEST_CASE("in-place ops update the tensor and every view of it") {
  Tensor base = arange(6, {DType::f32}).reshape({2, 3});
  Tensor row = base.select(0, 1);  // 3, 4, 5
  row.add_(f32({1, 1, 1}), 2.0);
  CHECK(test::values(base) == std::vector<double>{0, 1, 2, 5, 6, 7});
  row.sub_(f32({1}));
  row.mul_(f32({1, 2, 3}));
  row.div_(2.0);
  CHECK(test::values(row) == std::vector<double>{2, 5, 9});
  row.add_(1.0);
  row.mul_(2.0);
  CHECK(test::values(base) == std::vector<double>{0, 1, 2, 6, 12, 20});
  Tensor column = base.select(1, 0);  // a strided view: 0, 6
  column.clamp_(1.0, 5.0);
  CHECK(test::values(base) == std::vector<double>{1, 1, 2, 5, 12, 20});
  base.t().masked_fill_(tensor(std::vector<bool>{false, true}), -1);
  CHECK(test::values(base) == std::vector<double>{1, 1, 2, -1, -1, -1});
  row.relu_();
  CHECK(test::values(base) == std::vector<double>{1, 1, 2, 0, 0, 0});
  base.select(0, 0).fill_(3);
  CHECK(test::values(base) == std::vector<double>{3, 3, 3, 0, 0, 0});
  base.zero_();
  CHECK(test::values(base) == std::vector<double>(6, 0.0));
  Tensor y = f32({1, 2});
  y += f32({1, 1});
  y -= f32({0.5});
  y *= f32({2, 6});
  y /= f32({3});
  CHECK(test::values(y) == std::vector<double>{1, 5});
}

TEST_CASE("in-place ops bump the storage version shared by views") {
  Tensor base = zeros({4});
  Tensor view = base.narrow(0, 1, 2);
  const uint64_t before = base.storage()->version();
  view.add_(1.0);
  CHECK(base.storage()->version() == before + 1);
}

TEST_CASE("in-place ops refuse results their dtype cannot hold") {
  Tensor integers = arange(3);
  CHECK_THROWS_WITH_AS(integers.div_(2.0), "div_: true division cannot be written in place into a i64 tensor", Error);
  CHECK_THROWS_WITH_AS(integers.mul_(2.5), "mul_: the result type f32 cannot be written in place into a i64 tensor",
                       Error);  // torch: result type Float can't be cast to the desired output type Long
  CHECK_THROWS_AS(integers.add_(f32({1})), Error);
  Tensor flags = tensor(std::vector<bool>{true});
  CHECK_THROWS_AS(flags.add_(arange(1)), Error);
  integers.mul_(2.0);  // an integral scalar is fine
  CHECK(test::values(integers) == std::vector<double>{0, 2, 4});
  Tensor halves = zeros({2}, {DType::f16});
  halves.add_(f32({1.5f}));  // a wider float into a narrower float is allowed, as in PyTorch
  CHECK(test::values(halves) == std::vector<double>{1.5, 1.5});
}

TEST_CASE("in-place ops on non-leaf tensors are differentiable") {
  Tensor x = test::rand_input({3});
  Tensor z = test::rand_input({3});
  Tensor y = x * 2.0;
  y.mul_(z);
  y.add_(x);
  y.sum().backward();
  const auto xv = test::values(x), zv = test::values(z);
  const auto gx = test::values(x.grad()), gz = test::values(z.grad());
  for (int i = 0; i < 3; ++i) {
    CHECK(gx[i] == doctest::Approx(2 * zv[i] + 1));
    CHECK(gz[i] == doctest::Approx(2 * xv[i]));
  }
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        Tensor t = in[0] * 1.0;
        t.clamp_(-0.5, 0.5);
        t.masked_fill_(tensor(std::vector<bool>{true, false, false, true}), 0.25);
        t.relu_();  // last: its backward reads its output, which a later in-place op would change
        return t * in[1];
      },
      {test::rand_input({4}), test::rand_input({4})});
}

TEST_CASE("relu_ overwrites its input without a copy and differentiates from its output") {
  // Note [In place without a copy]: 1M floats, a size the CPU allocator counts (>= 64 KB).
  Tensor x = test::rand_input({1 << 20});
  Tensor y = x * 1.0;
  const CpuCacheStats before = cpu_cache_stats();
  y.relu_();
  const CpuCacheStats after = cpu_cache_stats();
  CHECK(after.hits + after.misses == before.hits + before.misses);  // nothing allocated
  Tensor w = test::rand_input({1 << 20});
  (y * w).sum().backward();
  const auto xv = test::values(x), wv = test::values(w), gx = test::values(x.grad());
  for (size_t i = 0; i < xv.size(); i += 997) CHECK(gx[i] == (xv[i] > 0 ? wv[i] : 0.0));
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        Tensor t = in[0] * in[1];
        t.relu_();
        return t.exp();  // exp saves relu_'s output as its input: untouched, so no error
      },
      {test::rand_input({2, 3}), test::rand_input({2, 3})});
}

TEST_CASE("a tensor written by relu_ and then modified again is reported at backward, as in PyTorch") {
  Tensor x = test::rand_input({3});
  Tensor y = x * 1.0;
  y.relu_();
  y.add_(1.0);  // relu_'s backward needs the output it wrote
  CHECK_THROWS_WITH_AS(y.sum().backward(),
                       doctest::Contains("needed for the gradient was modified by an in-place operation"), Error);
}

TEST_CASE("ReLU(inplace=true) gives ReLU's values and gradients and writes into its input") {
  const Tensor source = test::rand_input({4, 5});
  Tensor x1 = source.detach().requires_grad_(), x2 = source.detach().requires_grad_();
  nn::ReLU plain, in_place(/*inplace=*/true);
  const Tensor out1 = plain(x1 * 2.0);
  Tensor pre = x2 * 2.0;
  const Tensor out2 = in_place(pre);
  CHECK(out2.is_same(pre));
  CHECK(test::values(out1) == test::values(out2));
  out1.sum().backward();
  out2.sum().backward();
  CHECK(test::values(x1.grad()) == test::values(x2.grad()));
  CHECK(in_place.extra_repr() == "inplace=True");
  CHECK(plain.extra_repr().empty());
}

TEST_CASE("modifying a tensor saved for backward is reported at backward") {
  Tensor x = test::rand_input({3});
  Tensor y = x.exp();
  Tensor z = y * 1.0;
  y.add_(1.0);  // exp's backward needs its output
  CHECK_THROWS_WITH_AS(z.sum().backward(),
                       "backward: a tensor of shape [3] needed for the gradient was modified by an in-place operation "
                       "after it was saved (version 0 -> 1). Use the out-of-place op, or clone() before modifying.",
                       Error);
}

TEST_CASE("an operand modified in place after an op is an error only if its backward reads it") {
  Tensor a = test::rand_input({3});
  Tensor t = a * 1.0;
  const Tensor product = t * 2.0, quotient = t / 4.0;  // their gradients do not read t
  t.add_(1.0);
  (product + quotient).sum().backward();
  CHECK(test::values(a.grad()) == std::vector<double>{2.25, 2.25, 2.25});
  Tensor u = a * 1.0;
  const Tensor reciprocal = 1.0 / u;  // its gradient reads u
  u.add_(1.0);
  CHECK_THROWS_AS(reciprocal.sum().backward(), Error);
}

TEST_CASE("x.mul_(x) on a non-leaf differentiates like x * x") {
  Tensor a = test::rand_input({3});
  Tensor t = a * 1.0;
  t.mul_(t);
  t.add_(t);
  t.sum().backward();
  const auto av = test::values(a), grad = test::values(a.grad());
  for (int i = 0; i < 3; ++i) CHECK(grad[i] == doctest::Approx(4 * av[i]));  // d/da 2a^2
}

// ---- gradients ----

TEST_CASE("every differentiable binary op passes gradcheck with broadcasting") {
  // Values away from 0 and from each other, so |x|, max and the like are differentiable there.
  const auto a = test::rand_input({2, 3}, 0.5, 1.5);
  const auto b = test::rand_input({3}, 1.7, 2.5);
  const auto column = test::rand_input({2, 1}, 2.6, 3.4);
  const std::vector<std::pair<const char*, TensorFn>> ops = {
      {"add", [](const TensorList& in) { return in[0] + in[1]; }},
      {"add alpha", [](const TensorList& in) { return add(in[0], in[1], -1.5); }},
      {"sub", [](const TensorList& in) { return in[0] - in[1]; }},
      {"mul", [](const TensorList& in) { return in[0] * in[1]; }},
      {"div", [](const TensorList& in) { return in[0] / in[1]; }},
      {"pow", [](const TensorList& in) { return pow(in[0], in[1]); }},
      {"maximum", [](const TensorList& in) { return maximum(in[0], in[1]); }},
      {"minimum", [](const TensorList& in) { return minimum(in[0], in[1]); }},
  };
  for (const auto& [name, fn] : ops) {
    INFO(name);
    CHECK_GRADCHECK(fn, {a, b});
    CHECK_GRADCHECK(fn, {b, a});
    CHECK_GRADCHECK(fn, {column, b});  // [2, 1] with [3]: both operands broadcast
  }
}

TEST_CASE("every differentiable unary op passes gradcheck on non-contiguous inputs") {
  const auto x = test::noncontiguous_input({3, 4}, 0.2, 1.5);  // positive, for log, sqrt, rsqrt, pow
  const auto signed_x = test::noncontiguous_input({3, 4}, -2.0, 2.0);
  REQUIRE_FALSE(x.is_contiguous());
  const std::vector<std::pair<const char*, TensorFn>> positive_ops = {
      {"log", [](const TensorList& in) { return in[0].log(); }},
      {"sqrt", [](const TensorList& in) { return in[0].sqrt(); }},
      {"rsqrt", [](const TensorList& in) { return in[0].rsqrt(); }},
      {"pow scalar", [](const TensorList& in) { return in[0].pow(2.5); }},
      {"pow zero", [](const TensorList& in) { return in[0].pow(0.0) * in[0]; }},
      {"scalar pow", [](const TensorList& in) { return pow(1.7, in[0]); }},
      {"scalar div", [](const TensorList& in) { return 2.0 / in[0]; }},
  };
  for (const auto& [name, fn] : positive_ops) {
    INFO(name);
    CHECK_GRADCHECK(fn, {x});
  }
  const std::vector<std::pair<const char*, TensorFn>> signed_ops = {
      {"neg", [](const TensorList& in) { return -in[0]; }},
      {"exp", [](const TensorList& in) { return in[0].exp(); }},
      {"abs", [](const TensorList& in) { return in[0].abs(); }},
      {"tanh", [](const TensorList& in) { return in[0].tanh(); }},
      {"sigmoid", [](const TensorList& in) { return in[0].sigmoid(); }},
      {"relu", [](const TensorList& in) { return in[0].relu(); }},
      {"gelu", [](const TensorList& in) { return in[0].gelu(); }},
      {"gelu tanh", [](const TensorList& in) { return in[0].gelu(true); }},
      {"clamp", [](const TensorList& in) { return in[0].clamp(-0.7, 0.9); }},
      {"clamp min", [](const TensorList& in) { return in[0].clamp(0.1, std::nullopt); }},
      {"scalar sub", [](const TensorList& in) { return 1.0 - in[0] * 3.0 + 2.0; }},
  };
  for (const auto& [name, fn] : signed_ops) {
    INFO(name);
    CHECK_GRADCHECK(fn, {signed_x});
  }
}

TEST_CASE("where and masked_fill pass gradcheck with broadcasting") {
  const Tensor condition = tensor(std::vector<bool>{true, false, false, true, true, false}, {2, 3});
  CHECK_GRADCHECK([&](const TensorList& in) { return where(condition, in[0], in[1]); },
                  {test::rand_input({3}), test::noncontiguous_input({2, 3})});
  CHECK_GRADCHECK([&](const TensorList& in) { return where(condition.select(0, 0), in[0], 0.5); },
                  {test::rand_input({2, 3})});
  CHECK_GRADCHECK([&](const TensorList& in) { return in[0].masked_fill(condition.select(1, 2).unsqueeze(1), -1); },
                  {test::noncontiguous_input({2, 3})});
}

TEST_CASE("maximum and minimum split the gradient evenly on ties") {
  Tensor a = f64({1, 2, 3}).requires_grad_();
  Tensor b = f64({2, 2, 2}).requires_grad_();
  (maximum(a, b) + minimum(a, b) * 10.0).sum().backward();
  CHECK(test::values(a.grad()) == std::vector<double>{10, 5.5, 1});
  CHECK(test::values(b.grad()) == std::vector<double>{1, 5.5, 10});
}

TEST_CASE("clamp and relu pass the gradient at the boundary as PyTorch does") {
  Tensor x = f64({-1, 0, 1, 2}).requires_grad_();
  (x.clamp(0.0, 1.0) + x.relu()).sum().backward();
  // clamp: 1 on [min, max] inclusive; relu: 0 at 0.
  CHECK(test::values(x.grad()) == std::vector<double>{0, 1, 2, 1});
}

TEST_CASE("gradients of promoted operands come back in each operand's dtype") {
  Tensor a = f32({1, 2}).requires_grad_();
  Tensor b = f64({3}).requires_grad_();
  Tensor out = a * b;
  CHECK(out.dtype() == DType::f64);
  out.sum().backward();
  CHECK(a.grad().dtype() == DType::f32);
  CHECK(b.grad().dtype() == DType::f64);
  CHECK(test::values(a.grad()) == std::vector<double>{3, 3});
  CHECK(test::values(b.grad()) == std::vector<double>{3});
}

// ---- the strided loops: fast paths against the general path ----

TEST_CASE("binary kernels give the same values for every operand layout") {
  // 3x5x7: odd sizes, so no dim merges by accident. Each layout of `a` and `b` is compared with
  // the formula applied to the contiguous values.
  Generator generator(21);
  const Tensor a = rand({3, 5, 7}, {DType::f32}, &generator) + 0.5;
  const Tensor b_full = rand({3, 5, 7}, {DType::f32}, &generator) + 0.5;
  const std::vector<std::pair<const char*, Tensor>> a_layouts = {
      {"contiguous", a}, {"transposed", transposed_copy(a)}, {"strided", strided_copy(a)}};
  const std::vector<std::pair<const char*, Tensor>> b_layouts = {
      {"contiguous", b_full},
      {"transposed", transposed_copy(b_full)},
      {"scalar", scalar_tensor(1.25)},
      {"row [7]", b_full.select(0, 1).select(0, 2)},
      {"column [3, 5, 1]", b_full.narrow(2, 0, 1)},
      {"middle [3, 1, 7]", b_full.narrow(1, 4, 1)},
  };
  const std::vector<
      std::tuple<const char*, std::function<Tensor(const Tensor&, const Tensor&)>, double (*)(double, double)>>
      ops = {
          {"add", [](const Tensor& x, const Tensor& y) { return add(x, y, 2.0); },
           [](double x, double y) { return x + 2 * y; }},
          {"mul", [](const Tensor& x, const Tensor& y) { return x * y; }, [](double x, double y) { return x * y; }},
          {"div", [](const Tensor& x, const Tensor& y) { return x / y; }, [](double x, double y) { return x / y; }},
          {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); },
           [](double x, double y) { return std::max(x, y); }},
          {"gt", [](const Tensor& x, const Tensor& y) { return gt(x, y); },
           [](double x, double y) { return double(x > y); }},
      };
  for (const auto& [a_name, a_layout] : a_layouts) {
    for (const auto& [b_name, b_layout] : b_layouts) {
      const Tensor b_expanded = b_layout.to(DType::f32).expand({3, 5, 7}).contiguous();
      const auto av = test::values(a), bv = test::values(b_expanded);
      for (const auto& [op_name, op, formula] : ops) {
        INFO(op_name, ": a ", a_name, ", b ", b_name);
        const auto got = test::values(op(a_layout, b_layout.to(DType::f32)));
        REQUIRE(got.size() == av.size());
        int mismatches = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          // Each element is one f32 operation: exact up to f32 rounding of the result.
          const double expected = formula(av[i], bv[i]);
          mismatches += std::abs(got[i] - expected) > 1e-6 * std::abs(expected);
        }
        CHECK(mismatches == 0);
      }
    }
  }
}

TEST_CASE("in-place and unary kernels on strided tensors match the contiguous result") {
  Generator generator(22);
  const Tensor x = rand({3, 5, 7}, {DType::f64}, &generator) - 0.5;
  const auto expected_exp = test::values(x.exp());
  CHECK(test::values(transposed_copy(x).exp()) == expected_exp);
  CHECK(test::values(strided_copy(x).exp()) == expected_exp);
  CHECK(test::values(transposed_copy(x).gelu()) == test::values(x.gelu()));
  // An in-place op writing into a transposed view.
  Tensor target = transposed_copy(x);
  target.mul_(x);
  CHECK(test::values(target) == test::values(x * x));
  Tensor strided_target = strided_copy(x);
  strided_target.add_(scalar_tensor(1.0, {DType::f64}));
  CHECK(test::values(strided_target) == test::values(x + 1.0));
}

TEST_CASE("16-bit kernels compute in float and round once to the result") {
  Generator generator(23);
  const Tensor x = rand({3, 5, 7}, {DType::f32}, &generator) * 4.0 - 2.0;
  for (DType dtype : {DType::f16, DType::bf16}) {
    INFO(dtype);
    const Tensor narrow_x = transposed_copy(x.to(dtype));
    // Reference: the same inputs, the op in f32, rounded to the 16-bit dtype once.
    CHECK(test::values(narrow_x.tanh()) == test::values(narrow_x.to(DType::f32).tanh().to(dtype)));
    CHECK(test::values(narrow_x * narrow_x) ==
          test::values((narrow_x.to(DType::f32) * narrow_x.to(DType::f32)).to(dtype)));
    CHECK((narrow_x + narrow_x).dtype() == dtype);
  }
}

TEST_CASE("kernels give the same bits on 1 and 2 threads above the parallel grain") {
  // 41x37x29 = 43993 elements > kParallelGrain, with a transposed operand.
  Generator generator(24);
  const Tensor a = rand({41, 37, 29}, {DType::f32}, &generator);
  const Tensor b = transposed_copy(rand({41, 37, 29}, {DType::f32}, &generator));
  const Tensor row = rand({29}, {DType::f32}, &generator);
  auto run = [&](int threads) {
    test::NumThreadsGuard guard(threads);
    std::vector<Tensor> results = {a * b,
                                   add(a, row, 0.5),
                                   a.gelu(),
                                   b.exp(),
                                   gt(a, b),
                                   where(gt(a, b), a, row),
                                   a.clamp(0.25, 0.75),
                                   b.to(DType::f16),
                                   a.sum({1}),
                                   a.sum({0}),                         // rows added in place: 3 column chunks
                                   a.reshape({41 * 37, 29}).sum({0}),  // 8 row blocks
                                   b.sum(),
                                   b.mean({0, 2})};
    Tensor in_place = b.clone();
    in_place.transpose(0, 2).add_(row.unsqueeze(1).unsqueeze(1));
    results.push_back(in_place);
    return results;
  };
  const auto single = run(1), dual = run(2);
  for (size_t k = 0; k < single.size(); ++k) {
    INFO("result ", k);
    CHECK(test::values(single[k]) == test::values(dual[k]));
  }
}

// ---- sum and mean ----

TEST_CASE("sum and mean reduce over all dims, chosen dims and with keepdim") {
  const Tensor x = arange(24, {DType::f64}).reshape({2, 3, 4});
  CHECK(x.sum().item() == 276);
  CHECK(x.sum().dim() == 0);
  CHECK(x.mean().item() == 11.5);
  CHECK(test::values(x.sum({1})) == std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK(x.sum({1}).sizes() == Shape{2, 4});
  CHECK(x.sum({1}, true).sizes() == Shape{2, 1, 4});
  CHECK(test::values(x.sum({0, -1})) == std::vector<double>{60, 92, 124});
  CHECK(x.sum({}, true).sizes() == Shape{1, 1, 1});
  CHECK(test::values(x.mean({2})) == std::vector<double>{1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  CHECK(test::values(x.mean({0, 1}, true)) == std::vector<double>{10, 11, 12, 13});
  CHECK(x.mean({0, 1}, true).sizes() == Shape{1, 1, 4});
  // A transposed input reduces over its logical dims.
  CHECK(test::values(x.transpose(0, 2).sum({0})) == test::values(x.sum({2}).t()));
  CHECK(scalar_tensor(3.5).sum().item() == 3.5);
  CHECK(zeros({0, 3}).sum({0}).sizes() == Shape{3});
  CHECK(test::values(zeros({0, 3}).sum({0})) == std::vector<double>{0, 0, 0});
  CHECK_THROWS_WITH_AS(x.sum({1, -2}), "sum: dim repeated in [1, -2]", Error);
  CHECK_THROWS_AS(x.sum({3}), Error);
}

TEST_CASE("sum of integers and bools gives i64, and mean needs a floating tensor") {
  CHECK(arange(5).to(DType::i32).sum().dtype() == DType::i64);
  CHECK(arange(5).to(DType::u8).sum().item<int64_t>() == 10);
  CHECK(tensor(std::vector<bool>{true, false, true}).sum().item<int64_t>() == 2);
  CHECK(tensor(std::vector<uint8_t>{200, 200}).sum().item<int64_t>() == 400);
  CHECK_THROWS_WITH_AS(arange(5).mean(), "mean: expected a floating tensor, got i64", Error);
}

TEST_CASE("sum accumulates 16-bit floats in high precision and rounds once") {
  // 10000 copies of f16(0.1) = 0.0999755859375 add to 999.755859375, which rounds to f16 1000;
  // adding in f16 would stall far below.
  const Tensor x = full({10000}, 0.1, {DType::f16});
  CHECK(x.sum().dtype() == DType::f16);
  CHECK(x.sum().item() == 1000.0);
  CHECK(full({10000}, 0.1, {DType::bf16}).sum().item() ==
        doctest::Approx(1000.0).epsilon(0.004));  // bf16 spacing at 1000 is 4
}

namespace {
// The sum of x over `dims` computed here from its values in double, one output at a time: the
// reference for the kernel's paths.
std::vector<double> sum_by_definition(const Tensor& x, const Shape& dims) {
  const Tensor moved = x.permute([&] {
    Shape order;  // kept dims first, reduced dims last
    for (int64_t d = 0; d < x.dim(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
    order.insert(order.end(), dims.begin(), dims.end());
    return order;
  }());
  const auto v = test::values(moved);
  int64_t reduced = 1;
  for (int64_t d : dims) reduced *= x.size(d);
  std::vector<double> sums(v.size() / reduced, 0.0);
  for (size_t i = 0; i < v.size(); ++i) sums[i / reduced] += v[i];
  return sums;
}
}  // namespace

TEST_CASE("sum over leading dims matches the definition on odd shapes, views, broadcasts and dtypes") {
  Generator generator(31);
  const Tensor x64 = rand({301, 37}, {DType::f64}, &generator) - 0.5;
  const Tensor cube64 = rand({5, 3, 67}, {DType::f64}, &generator) - 0.5;
  const Tensor wide64 = rand({130, 1100}, {DType::f64}, &generator) - 0.5;
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    const Tensor x = x64.to(dtype), cube = cube64.to(dtype), wide = wide64.to(dtype);
    // All but the last keep one block of a constant stride, so their rows are added in place
    // (Note [Sums over leading dims]); the last, a transpose, reduces as rows.
    const std::vector<std::pair<Tensor, Shape>> cases = {
        {x, {0}},
        {cube, {0, 1}},
        {cube, {0}},
        {cube.unsqueeze(1), {0, 2}},                   // a size-1 kept dim between reduced ones
        {wide, {0}},                                   // several row blocks and column chunks
        {x.slice(0, 1, 301, 3), {0}},                  // every third row
        {cube.transpose(0, 1), {0, 1}},                // reduced dims in the other order
        {cube.permute({2, 0, 1}), {1, 2}},             // the kept dim first in order, innermost in memory
        {x.slice(0, 0, 1, 1).expand({250, 37}), {0}},  // a broadcast row: stride 0
        {x.slice(1, 0, 37, 2), {0}},                   // kept columns with stride 2
        {wide.slice(1, 1, 1100, 2), {0}},              // the same over several column chunks
        {cube.slice(2, 0, 67, 3), {0, 1}},             // stride 3 under two reduced dims
        {x.t(), {0}},                                  // a kept dim with stride 37: rows interleave
    };
    // The kernel adds in double in its own order and rounds once: within an f64 rounding error of
    // the definition's sum in f64, and within half an ulp (here: one) of it in f32 and bf16.
    const double relative = dtype == DType::f64   ? 1e-14
                            : dtype == DType::f32 ? std::ldexp(1.0, -23)
                                                  : std::ldexp(1.0, -7);
    for (size_t k = 0; k < cases.size(); ++k) {
      CAPTURE(dtype);
      CAPTURE(k);
      const auto& [input, dims] = cases[k];
      const auto got = test::values(input.sum(dims));
      const auto expected = sum_by_definition(input, dims);
      REQUIRE(got.size() == expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output ", i, ": got ", got[i], ", expected ", expected[i]);
        CHECK(std::abs(got[i] - expected[i]) <= relative * std::abs(expected[i]) + 1e-10);
      }
    }
  }
  // Integers and bools sum exactly into i64.
  const Tensor integers = randint(-50, 50, {77, 13}, {DType::i32}, &generator);
  CHECK(test::values(integers.sum({0})) == sum_by_definition(integers, {0}));
  const Tensor flags = gt(rand({77, 13}, {}, &generator), 0.5);
  CHECK(test::values(flags.sum({0})) == sum_by_definition(flags, {0}));
}

TEST_CASE("sum and mean pass gradcheck over dims, keepdim and non-contiguous inputs") {
  const auto x = test::noncontiguous_input({3, 4});
  const auto cube = test::rand_input({2, 3, 4});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].sum(); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].sum({0}); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].sum({-1}, true); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].sum({0, 2}); }, {cube});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].mean(); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].mean({1}, true) * in[0]; }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].transpose(0, 2).mean({0, 1}); }, {cube});
}

TEST_CASE("a broadcast scalar first operand takes the fast path and matches the strided path") {
  // scalar - x runs the (stride 0, contiguous) fast path; the same with x transposed runs the
  // general strided loop. Both must agree element for element.
  const Tensor x = randn({37, 41}, {}, &test::rng());
  const Tensor scalar = full({1, 1}, 0.25);
  const Tensor fast = sub(scalar, x);
  const Tensor strided = sub(scalar, x.t().contiguous().t());
  CHECK(test::max_abs_diff(fast, strided) == 0.0);
  CHECK(test::values(fast)[5] == doctest::Approx(0.25 - test::values(x)[5]));
}
