// Matrix products: matmul / mm / bmm / addmm against hand-computed values and against a
// mul + sum reference, on every rank combination, odd shapes, views and dtypes; their gradients;
// and the GEMM kernel's layouts (Note [GEMM operand layouts] in core/cpu/gemm.cpp).
#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/kernels/gemm.h"
#include "core/kernels/pointwise.h"
#include "core/profiler.h"
#include "helpers.h"

using namespace sg;

namespace {

// The product written without a GEMM: a 1-D a is the row [1, k], a 1-D b the column [k, 1];
// out[..., i, j] = sum_k a[..., i, k] * b[..., k, j] by broadcasting mul, then a sum (in f64).
Tensor reference_matmul(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor out = (a2.to(DType::f64).unsqueeze(-1) * b2.to(DType::f64).unsqueeze(-3)).sum({-2});
  if (b.dim() == 1) out = out.squeeze(-1);
  if (a.dim() == 1) out = out.squeeze(b.dim() == 1 ? -1 : -2);
  return out;
}

Tensor randn_of(const Shape& shape, DType dtype = DType::f64) { return randn(shape, {dtype}, &test::rng()); }

// matmul(a, b) has the reference's shape and values within `tolerance`.
void check_matches_reference(const Tensor& a, const Tensor& b, double tolerance) {
  const Tensor out = matmul(a, b);
  const Tensor expected = reference_matmul(a, b);
  INFO("a ", shape_str(a.sizes()), " strides ", shape_str(a.strides()), ", b ", shape_str(b.sizes()), " strides ",
       shape_str(b.strides()));
  REQUIRE(out.sizes() == expected.sizes());
  CHECK(out.dtype() == a.dtype());
  CHECK(test::max_abs_diff(out, expected) <= tolerance);
}

// f64 sums of at most a few dozen products of values ~N(0, 1) are exact to ~1e-14.
constexpr double kF64Tolerance = 1e-12;

}  // namespace

TEST_CASE("mm of small matrices equals the hand-computed product") {
  const Tensor a = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = tensor(std::vector<double>{7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(test::values(mm(a, b)) == std::vector<double>{58, 64, 139, 154});
  CHECK(test::values(matmul(b, a)) == std::vector<double>{39, 54, 69, 49, 68, 87, 59, 82, 105});
}

TEST_CASE("matmul of two vectors is their dot product as a 0-dim tensor") {
  const Tensor out = matmul(tensor(std::vector<double>{1, 2, 3}), tensor(std::vector<double>{4, 5, 6}));
  CHECK(out.dim() == 0);
  CHECK(out.item() == 32.0);
}

TEST_CASE("matmul promotes a vector to a row on the left and a column on the right") {
  const Tensor m = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor left = matmul(tensor(std::vector<double>{1, -1}), m);  // [2] @ [2, 3] -> [3]
  CHECK(left.sizes() == Shape{3});
  CHECK(test::values(left) == std::vector<double>{-3, -3, -3});
  const Tensor right = m.matmul(tensor(std::vector<double>{1, 0, 2}));  // [2, 3] @ [3] -> [2]
  CHECK(right.sizes() == Shape{2});
  CHECK(test::values(right) == std::vector<double>{7, 16});
}

TEST_CASE("matmul matches the mul-and-sum reference for every rank combination") {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{13}, {13}},                 // 1-D . 1-D
      {{13}, {13, 5}},              // 1-D . 2-D
      {{7, 13}, {13}},              // 2-D . 1-D
      {{7, 13}, {13, 5}},           // 2-D . 2-D, odd sizes
      {{3, 7, 13}, {13}},           // 3-D . 1-D
      {{13}, {3, 13, 5}},           // 1-D . 3-D
      {{3, 7, 13}, {13, 5}},        // folded into one GEMM (Note [Folding batch dims into rows])
      {{7, 13}, {3, 13, 5}},        // a broadcast over b's batch
      {{3, 7, 13}, {3, 13, 5}},     // batched, equal batch dims
      {{2, 1, 7, 13}, {3, 13, 5}},  // batch dims broadcast both ways -> [2, 3, 7, 5]
      {{1, 7, 13}, {4, 13, 5}},     // size-1 batch dim broadcast
      {{7, 1}, {1, 5}},             // outer product, k = 1
      {{1, 13}, {13, 1}},           // 1 x 1 result
  };
  for (const Case& c : cases) check_matches_reference(randn_of(c.a), randn_of(c.b), kF64Tolerance);
}

TEST_CASE("matmul reads transposed and sliced operands without changing the result") {
  // Transposes have a unit stride in the other dim (passed to BLAS with a trans flag), column
  // ranges keep a row stride larger than their width, step slices have no unit stride (copied).
  const Tensor transposed_a = randn_of({13, 7}).t();                   // [7, 13]
  const Tensor transposed_b = randn_of({5, 13}).t();                   // [13, 5]
  const Tensor column_range_a = randn_of({7, 20}).narrow(1, 4, 13);    // [7, 13], row stride 20
  const Tensor stepped_b = randn_of({13, 10}).slice(1, 0, 10, 2);      // [13, 5], column stride 2
  const Tensor row_stepped_a = randn_of({14, 13}).slice(0, 0, 14, 2);  // [7, 13], row stride 26
  check_matches_reference(transposed_a, transposed_b, kF64Tolerance);
  check_matches_reference(column_range_a, stepped_b, kF64Tolerance);
  check_matches_reference(row_stepped_a, transposed_b, kF64Tolerance);
  check_matches_reference(stepped_b.t(), column_range_a.t(), kF64Tolerance);
  // Batched: a transposed batch of matrices, a permuted batch that cannot be folded into rows,
  // a b expanded over the batch (stride 0), and a stepped slice of a batch.
  check_matches_reference(randn_of({3, 13, 7}).transpose(1, 2), randn_of({3, 13, 5}), kF64Tolerance);
  check_matches_reference(randn_of({7, 3, 13}).transpose(0, 1), randn_of({13, 5}), kF64Tolerance);
  check_matches_reference(randn_of({3, 7, 13}), randn_of({13, 5}).expand({3, 13, 5}), kF64Tolerance);
  check_matches_reference(randn_of({3, 7, 26}).slice(2, 0, 26, 2), randn_of({3, 13, 5}), kF64Tolerance);
  check_matches_reference(randn_of({1, 13}).expand({7, 13}), randn_of({13, 5}), kF64Tolerance);  // row stride 0
}

TEST_CASE("matmul of many small batched products matches the reference") {
  // 16^3 multiply-adds per product is below the size at which the batch is split across threads.
  check_matches_reference(randn_of({32, 16, 16}), randn_of({32, 16, 16}), kF64Tolerance);
  check_matches_reference(randn_of({4, 8, 5, 3}), randn_of({8, 3, 6}), kF64Tolerance);
}

TEST_CASE("matmul of a large product that OpenBLAS splits across threads matches the reference") {
  // k = 300: f64 rounding grows like sqrt(k) * 1e-16 * |terms|; 1e-11 leaves a wide margin.
  check_matches_reference(randn_of({2, 70, 300}), randn_of({300, 90}), 1e-11);
  check_matches_reference(randn_of({120, 300}).t(), randn_of({120, 110}), 1e-11);
}

TEST_CASE("f32 matmul matches the f64 reference within f32 rounding") {
  // Each of the 13 products and partial sums rounds to f32 (relative 6e-8) and the sums are
  // at most ~|a||b| ~ 13 for N(0,1) inputs, so the error stays below 13 * 13 * 6e-8 ~ 1e-5.
  check_matches_reference(randn_of({7, 13}, DType::f32), randn_of({13, 5}, DType::f32), 1e-5);
  check_matches_reference(randn_of({2, 1, 7, 13}, DType::f32), randn_of({3, 13, 5}, DType::f32), 1e-5);
  check_matches_reference(randn_of({13, 7}, DType::f32).t(), randn_of({13}, DType::f32), 1e-5);
}

TEST_CASE("f16 and bf16 matmul equal the f32 product rounded once") {
  for (DType dtype : {DType::f16, DType::bf16}) {
    INFO("dtype ", dtype);
    const Tensor a = randn_of({3, 7, 13}, dtype), b = randn_of({13, 5}, dtype).t().contiguous().t();
    const Tensor out = matmul(a, b);
    CHECK(out.dtype() == dtype);
    // The same f32 GEMM on the same (exactly representable) values, rounded once at the end:
    // accumulating in 16 bits, or rounding twice, would differ in some of the 105 results.
    const Tensor expected = matmul(a.to(DType::f32), b.to(DType::f32)).to(dtype);
    CHECK(test::values(out) == test::values(expected));
    // And that is the f64 product to within half an ulp of a value |x| < 32 (f16: 2^-7 = 0.0078;
    // bf16: 2^-4 = 0.0625; sums of 13 products of N(0,1) values stay far below 32) plus f32 error.
    CHECK(test::max_abs_diff(out, reference_matmul(a, b)) <= (dtype == DType::f16 ? 0.008 : 0.063));
  }
}

TEST_CASE("integer matmul is exact") {
  for (DType dtype : {DType::i64, DType::i32}) {
    INFO("dtype ", dtype);
    const Tensor a = randint(-9, 10, {3, 7, 13}, {dtype, Device::cpu()}, &test::rng());
    const Tensor b = randint(-9, 10, {13, 5}, {dtype, Device::cpu()}, &test::rng());
    const Tensor out = matmul(a.transpose(1, 2).contiguous().transpose(1, 2), b);
    CHECK(out.dtype() == dtype);
    CHECK(test::values(out) == test::values(reference_matmul(a, b)));
  }
}

TEST_CASE("mm and bmm equal matmul on their ranks") {
  const Tensor a = randn_of({7, 13}), b = randn_of({13, 5});
  CHECK(test::max_abs_diff(mm(a, b), reference_matmul(a, b)) <= kF64Tolerance);
  const Tensor x = randn_of({3, 7, 13}), y = randn_of({3, 5, 13}).transpose(1, 2);
  CHECK(test::max_abs_diff(bmm(x, y), reference_matmul(x, y)) <= kF64Tolerance);
}

TEST_CASE("addmm computes beta * input + alpha * a @ b with input broadcast") {
  const Tensor a = randn_of({7, 13}), b = randn_of({13, 5});
  for (const Shape& input_shape : {Shape{7, 5}, Shape{5}, Shape{7, 1}, Shape{}}) {
    INFO("input ", shape_str(input_shape));
    const Tensor input = randn_of(input_shape);
    const Tensor expected = input * 0.5 + reference_matmul(a, b) * -2.0;
    CHECK(test::max_abs_diff(addmm(input, a, b, 0.5, -2.0), expected) <= kF64Tolerance);
  }
}

TEST_CASE("addmm with beta and alpha 1 broadcasts any 1-D input, in f32 and f64") {
  // A bias row of out's width takes kernels::gemm_bias; a single value or another dtype does not.
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor a = randn_of({7, 13}).to(dtype), b = randn_of({13, 5}).to(dtype);
    for (const Shape& input_shape : {Shape{5}, Shape{1}}) {
      INFO("input ", shape_str(input_shape), " ", dtype);
      const Tensor input = randn_of(input_shape).to(dtype);
      const Tensor expected = input.to(DType::f64) + reference_matmul(a.to(DType::f64), b.to(DType::f64));
      CHECK(test::max_abs_diff(addmm(input, a, b), expected) <= 1e-4);
    }
  }
}

TEST_CASE("addmm with beta 0 ignores the input, NaN included") {
  const Tensor input = full({7, 5}, std::nan(""), {DType::f64});
  const Tensor a = randn_of({7, 13}), b = randn_of({13, 5});
  CHECK(test::max_abs_diff(addmm(input, a, b, 0.0, 1.0), reference_matmul(a, b)) <= kF64Tolerance);
}

TEST_CASE("products with an empty inner dim give beta * input") {
  const Tensor a = randn_of({3, 0}), b = randn_of({0, 4});
  CHECK(test::values(matmul(a, b)) == std::vector<double>(12, 0.0));
  CHECK(test::values(addmm(full({4}, 2.0, {DType::f64}), a, b, 3.0, 1.0)) == std::vector<double>(12, 6.0));
  CHECK(matmul(randn_of({0, 3}), randn_of({3, 4})).sizes() == Shape{0, 4});
}

TEST_CASE("the gemm kernel writes into a transposed output view through a temporary") {
  // BLAS has no trans flag for C, so an out stored transposed takes the temporary path; beta
  // reads its old values through the same view.
  const Tensor a = randn_of({7, 13}), b = randn_of({13, 5});
  const Tensor storage = randn_of({5, 7});
  const Tensor out = storage.t();  // [7, 5], column-major
  const Tensor expected = reference_matmul(a, b) * 2.0 + out * 3.0;
  kernels::gemm(out, a, b, 2.0, 3.0);
  CHECK(test::max_abs_diff(out, expected) <= kF64Tolerance);
}

TEST_CASE("matmul gradients match finite differences for every rank combination") {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{4}, {4}},       {{4}, {4, 3}},       {{2, 4}, {4}},       {{2, 4}, {4, 3}},       {{2, 3, 4}, {4}},
      {{4}, {2, 4, 3}}, {{2, 3, 4}, {4, 3}}, {{3, 4}, {2, 4, 2}}, {{2, 3, 4}, {2, 4, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
  };
  for (const Case& c : cases) {
    INFO("a ", shape_str(c.a), ", b ", shape_str(c.b));
    CHECK_GRADCHECK([](const TensorList& x) { return matmul(x[0], x[1]); },
                    {test::rand_input(c.a), test::rand_input(c.b)});
  }
}

TEST_CASE("matmul gradients are right for transposed and unfoldable operands") {
  // a = x^T per batch and a permuted batch (not foldable into rows), so backward takes the
  // batched paths; b reaches the GEMM transposed.
  CHECK_GRADCHECK([](const TensorList& x) { return matmul(x[0].transpose(-1, -2), x[1].t()); },
                  {test::rand_input({2, 4, 3}), test::rand_input({2, 4})});
  CHECK_GRADCHECK([](const TensorList& x) { return matmul(x[0].transpose(0, 1), x[1]); },
                  {test::rand_input({3, 2, 4}), test::rand_input({4, 2})});
}

TEST_CASE("mm, bmm and addmm gradients match finite differences") {
  CHECK_GRADCHECK([](const TensorList& x) { return mm(x[0], x[1]); },
                  {test::rand_input({3, 4}), test::rand_input({4, 2})});
  CHECK_GRADCHECK([](const TensorList& x) { return bmm(x[0], x[1]); },
                  {test::rand_input({2, 3, 4}), test::rand_input({2, 4, 2})});
  for (const Shape& input_shape : {Shape{3, 2}, Shape{2}, Shape{3, 1}}) {
    INFO("input ", shape_str(input_shape));
    CHECK_GRADCHECK([](const TensorList& x) { return addmm(x[0], x[1], x[2], 0.5, -1.5); },
                    {test::rand_input(input_shape), test::rand_input({3, 4}), test::rand_input({4, 2})});
  }
}

TEST_CASE("linear on a batch of rows equals the reference product plus bias, folded or not") {
  // A contiguous [..., in] input takes the one-GEMM path with the bias in the GEMM's output
  // (addmm); a transposed one is not foldable and goes through matmul and a broadcast add.
  const Tensor weight = randn_of({5, 7}), bias = randn_of({5});
  for (const Tensor& input : {randn_of({3, 4, 7}), randn_of({2, 1, 3, 7}), randn_of({4, 3, 7}).transpose(0, 1)}) {
    INFO("input ", shape_str(input.sizes()), " strides ", shape_str(input.strides()));
    const Tensor expected = reference_matmul(input, weight.t()) + bias;
    const Tensor out = linear(input, weight, bias);
    REQUIRE(out.sizes() == expected.sizes());
    CHECK(test::max_abs_diff(out, expected) <= kF64Tolerance);
  }
}

TEST_CASE("linear gradients match finite differences on contiguous and transposed batches") {
  CHECK_GRADCHECK([](const TensorList& x) { return linear(x[0], x[1], x[2]); },
                  {test::rand_input({2, 3, 4}), test::rand_input({5, 4}), test::rand_input({5})});
  CHECK_GRADCHECK([](const TensorList& x) { return linear(x[0].transpose(0, 1), x[1], x[2]); },
                  {test::rand_input({3, 2, 4}), test::rand_input({5, 4}), test::rand_input({5})});
}

TEST_CASE("the backward of linear writes the weight gradient in the weight's layout, without a copy") {
  // weight.t() is a transposed view; its gradient is computed transposed, so the weight's gradient
  // is contiguous and AccumulateGrad keeps it as .grad instead of cloning it. Checked on a folded
  // [B, T, in] batch and on a 2-D one, against the gradient of a contiguous copy of weight.t().
  for (const Shape& input_shape : {Shape{3, 6, 7}, Shape{9, 7}}) {
    INFO("input ", shape_str(input_shape));
    const Tensor input = randn_of(input_shape), weight = randn_of({5, 7}), bias = randn_of({5});
    Shape out_shape = input_shape;
    out_shape.back() = 5;
    const Tensor grad_out = randn_of(out_shape);
    const Tensor w = weight.detach().clone().requires_grad_(), b = bias.detach().clone().requires_grad_();
    const Tensor out = linear(input, w, b);
    profiler::Profile profile;
    out.backward(grad_out);
    profile.stop();
    int copies = 0;
    for (const profiler::Event& event : profile.result().events) copies += event.name == "copy";
    CHECK(copies == 0);
    const Tensor w_t = weight.t().contiguous().requires_grad_();
    addmm(bias, input.reshape({-1, 7}), w_t).backward(grad_out.reshape({-1, 5}));
    CHECK(test::max_abs_diff(w.grad(), w_t.grad().t()) <= kF64Tolerance);
  }
}

TEST_CASE("linear names the input and weight shapes that do not fit") {
  const Tensor input = randn_of({2, 3, 4}), weight = randn_of({5, 6}), bias = randn_of({5});
  CHECK_THROWS_WITH_AS(linear(input, weight, bias), doctest::Contains("[2, 3, 4]"), Error);
  CHECK_THROWS_WITH_AS(linear(input, weight, bias), doctest::Contains("[5, 6]"), Error);
}

TEST_CASE("baddbmm computes beta * input + alpha * bmm(a, b) with input broadcast, and its gradients") {
  const Tensor a = randn_of({3, 7, 13}), b = randn_of({3, 13, 5});
  for (const Shape& input_shape : {Shape{3, 7, 5}, Shape{7, 5}, Shape{1, 7, 1}, Shape{}}) {
    INFO("input ", shape_str(input_shape));
    const Tensor input = randn_of(input_shape);
    const Tensor expected = input * 0.5 + reference_matmul(a, b) * -2.0;
    CHECK(test::max_abs_diff(baddbmm(input, a, b, 0.5, -2.0), expected) <= kF64Tolerance);
    CHECK_GRADCHECK([](const TensorList& x) { return baddbmm(x[0], x[1], x[2], 0.5, -1.5); },
                    {test::rand_input(input_shape), test::rand_input({3, 7, 4}), test::rand_input({3, 4, 5})});
  }
  CHECK_THROWS_WITH_AS(baddbmm(randn_of({3, 7, 5}), a, randn_of({2, 13, 5})),
                       doctest::Contains("different batch sizes"), Error);
}

TEST_CASE("matmul backward reduces broadcast batch dims to each input's shape") {
  Tensor a = test::rand_input({2, 1, 3, 4}), b = test::rand_input({5, 4, 2});
  matmul(a, b).sum().backward();
  CHECK(a.grad().sizes() == a.sizes());
  CHECK(b.grad().sizes() == b.sizes());
  // d(sum(a @ b))/da[..., i, k] = sum_j of b summed over its 5 batch entries.
  const Tensor expected_a = b.detach().sum({0, 2}).reshape({1, 1, 1, 4}).expand({2, 1, 3, 4});
  CHECK(test::max_abs_diff(a.grad(), expected_a) <= kF64Tolerance);
  Tensor v = test::rand_input({4});
  matmul(v, b).sum().backward();
  CHECK(v.grad().sizes() == Shape{4});
}

TEST_CASE("products with mismatched inner dims throw naming the op and both shapes") {
  const auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::string mm_error = message([] { mm(randn_of({2, 3}), randn_of({4, 5})); });
  CHECK(mm_error.find("mm") != std::string::npos);
  CHECK(mm_error.find("[2, 3]") != std::string::npos);
  CHECK(mm_error.find("[4, 5]") != std::string::npos);
  const std::string matmul_error = message([] { matmul(randn_of({3}), randn_of({2, 4, 5})); });
  CHECK(matmul_error.find("matmul") != std::string::npos);
  CHECK(matmul_error.find("[3] and [2, 4, 5]") != std::string::npos);
  CHECK_THROWS_AS(matmul(randn_of({3}), randn_of({4})), Error);
  CHECK_THROWS_AS(bmm(randn_of({2, 3, 4}), randn_of({2, 5, 6})), Error);
  CHECK_THROWS_AS(addmm(randn_of({3, 5}), randn_of({3, 4}), randn_of({5, 5})), Error);
  CHECK_THROWS_WITH_AS(matmul(randn_of({2, 3, 4}), randn_of({3, 4, 5})),
                       "matmul: the batch dims of shapes [2, 3, 4] and [3, 4, 5] cannot be broadcast (2 vs 3)", Error);
}

TEST_CASE("products reject wrong ranks, mixed dtypes and inputs that do not broadcast") {
  CHECK_THROWS_AS(mm(randn_of({2, 3, 4}), randn_of({4, 5})), Error);
  CHECK_THROWS_AS(bmm(randn_of({3, 4}), randn_of({4, 5})), Error);
  CHECK_THROWS_AS(bmm(randn_of({2, 3, 4}), randn_of({3, 4, 5})), Error);
  CHECK_THROWS_AS(matmul(randn_of({}), randn_of({3})), Error);
  CHECK_THROWS_AS(matmul(randn_of({2, 3}, DType::f32), randn_of({3, 4})), Error);
  CHECK_THROWS_AS(addmm(randn_of({4, 5}), randn_of({3, 4}), randn_of({4, 5})), Error);
}

// ---- gemm_bias: a Linear layer's product with the bias added by the GEMM (Note [The bias inside the GEMM]) ----

namespace {

// The plain path gemm_bias replaces: out filled with the bias row by row, then a beta = 1 GEMM.
Tensor bias_then_gemm(const Tensor& a, const Tensor& b, const Tensor& bias) {
  const Tensor out = empty({a.size(0), b.size(1)}, {a.dtype()});
  kernels::copy(out, bias.expand(out.sizes()));
  kernels::gemm(out, a, b, 1.0, 1.0);
  return out;
}

// gemm_bias(a, b, bias) equals the plain path within f32 rounding: both sum at most 130 products of
// N(0, 1) values (|sum| ~ 12) in f32 in different orders, ~130 * 6e-8 * 12 ~ 1e-4 at worst.
void check_gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias) {
  INFO("a ", shape_str(a.sizes()), " strides ", shape_str(a.strides()), ", b ", shape_str(b.sizes()), " strides ",
       shape_str(b.strides()), ", bias strides ", shape_str(bias.strides()));
  const Tensor out = empty({a.size(0), b.size(1)}, {a.dtype()});
  kernels::gemm_bias(out, a, b, bias);
  CHECK(test::max_abs_diff(out, bias_then_gemm(a, b, bias)) <= 1e-4);
}

}  // namespace

TEST_CASE("gemm_bias equals the bias copied into every row and a beta 1 gemm on odd shapes") {
  const DType f32 = DType::f32;
  for (const auto& [m, n, k] :
       std::vector<std::array<int64_t, 3>>{{37, 29, 19}, {1, 17, 33}, {65, 1, 7}, {130, 51, 130}}) {
    check_gemm_bias(randn_of({m, k}, f32), randn_of({k, n}, f32), randn_of({n}, f32));
  }
}

TEST_CASE("gemm_bias takes transposed, sliced and strided operands and bias as they are") {
  const DType f32 = DType::f32;
  const Tensor weight = randn_of({29, 19}, f32);  // a Linear layer's [out, in]: b is its transpose
  const Tensor bias = randn_of({29}, f32);
  check_gemm_bias(randn_of({37, 19}, f32), weight.t(), bias);
  check_gemm_bias(randn_of({19, 37}, f32).t(), weight.t(), bias);                                // both transposed
  check_gemm_bias(randn_of({37, 40}, f32).slice(1, 3, 22), weight.t(), bias);                    // a row stride of 40
  check_gemm_bias(randn_of({37, 19}, f32), randn_of({19, 60}, f32).slice(1, 5, 34), bias);       // b's rows 60 apart
  check_gemm_bias(randn_of({37, 19}, f32), weight.t(), randn_of({58}, f32).slice(0, 0, 58, 2));  // bias stride 2
  check_gemm_bias(randn_of({37, 19}, f32), weight.t(), randn_of({1}, f32).expand({29}));         // bias broadcast
}

TEST_CASE("f32 linear with a 1-D bias equals input @ weight^T + bias and gives the same bits every call") {
  const DType f32 = DType::f32;
  const Tensor weight = randn_of({23, 17}, f32), bias = randn_of({23}, f32);
  for (const Tensor& input : {randn_of({45, 17}, f32), randn_of({3, 11, 17}, f32)}) {
    INFO("input ", shape_str(input.sizes()));
    const Tensor out = linear(input, weight, bias);
    const Tensor expected = reference_matmul(input, weight.t()) + bias.to(DType::f64);
    CHECK(test::max_abs_diff(out, expected) <= 1e-4);  // 17 f32 products of N(0, 1) values, as above
    CHECK(test::max_abs_diff(out, linear(input, weight, bias)) == 0);
  }
}

TEST_CASE("gemm_bias names the shapes of an out, operands or bias that do not fit") {
  const DType f32 = DType::f32;
  const Tensor out = empty({4, 5}, {f32});
  CHECK_THROWS_WITH(kernels::gemm_bias(out, randn_of({4, 3}, f32), randn_of({3, 5}, f32), randn_of({4}, f32)),
                    doctest::Contains("bias [4]"));
  CHECK_THROWS_WITH(kernels::gemm_bias(out, randn_of({4, 3}, f32), randn_of({2, 5}, f32), randn_of({5}, f32)),
                    doctest::Contains("a [4, 3] @ b [2, 5]"));
}
