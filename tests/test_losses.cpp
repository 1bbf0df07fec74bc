// Losses: cross_entropy and nll_loss against values computed by PyTorch and against the composite
// formula (log_softmax, gather, sums), their gradients against finite differences, mse_loss, and
// the errors that name a bad target.
#include <cmath>
#include <vector>

#include "helpers.h"

using namespace sg;
namespace F = sg::nn::functional;

namespace {

// The fixed inputs of the PyTorch reference values below.
Tensor reference_logits() {
  return tensor(std::vector<double>{0.5,  -1.2, 2.0, 0.3, -0.7, 1.5, 0.2, -0.4, 0.9,  0.0,
                                    -2.0, 0.7,  0.1, 1.8, -0.3, 0.0, 0.0, 3.0,  -1.0, 0.4},
                {4, 5});
}
Tensor reference_target() { return tensor(std::vector<int64_t>{2, 0, 3, 1}); }
Tensor reference_weight() { return tensor(std::vector<double>{0.5, 1.0, 2.0, 1.5, 0.8}); }
Tensor reference_nd_logits() {  // [2, 3, 2]
  return tensor(std::vector<double>{0.2, -0.5, 1.0, 0.3, -0.7, 0.8, 0.0, 1.1, -1.3, 0.4, 0.6, -0.2}, {2, 3, 2});
}
Tensor reference_nd_target() { return tensor(std::vector<int64_t>{2, -1, 0, 1}, {2, 2}); }

// The reference values are printed by PyTorch with 12 significant digits.
constexpr double kReferenceTolerance = 1e-10;

// Cross entropy written with separate ops, for comparison with the fused kernel: rows of
// log-probabilities, the target's picked out by gather, the smoothing term as a weighted sum.
Tensor composite_cross_entropy(const Tensor& logits, const Tensor& target, const F::CrossEntropyOptions& options) {
  const int64_t C = logits.size(1);
  Shape class_last{0};
  for (int64_t d = 2; d < logits.dim(); ++d) class_last.push_back(d);
  class_last.push_back(1);
  const Tensor log_probs = log_softmax(logits, 1).permute(class_last).reshape({-1, C});
  const Tensor flat_target = target.reshape({-1});
  const Tensor counted = ne(flat_target, static_cast<double>(options.ignore_index));
  const Tensor safe_target = where(counted, flat_target, 0.0);
  const Tensor class_weight = options.weight.defined() ? options.weight : ones({C}, {logits.dtype()});
  const Tensor row_weight = index_select(class_weight, 0, safe_target) * counted.to(logits.dtype());
  const Tensor picked = gather(log_probs, 1, safe_target.unsqueeze(1)).squeeze(1);
  const double s = options.label_smoothing;
  const Tensor smooth = (log_probs * class_weight).sum({1}) * counted.to(logits.dtype());
  const Tensor rows = -(1 - s) * picked * row_weight - (s / static_cast<double>(C)) * smooth;
  if (options.reduction == Reduction::none) return rows.reshape(target.sizes());
  if (options.reduction == Reduction::sum) return rows.sum();
  return rows.sum() / row_weight.sum();
}

// [N, C, d...] logits f64 requiring grad and targets with about one in five rows ignored.
Tensor random_target(const Shape& shape, int64_t C, int64_t ignore_index) {
  Tensor target = randint(0, C, shape, {DType::i64}, &test::rng());
  const Tensor ignored = lt(rand(shape, {}, &test::rng()), 0.2);
  return where(ignored, target * 0 + ignore_index, target);
}

const Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

}  // namespace

// ---- values against PyTorch ----
// Produced once with /usr/bin/python3 (torch 1.13.1, f64 inputs), e.g.
//   F.cross_entropy(A, t, weight=w, ignore_index=1, label_smoothing=0.2, reduction='none')
// with A = reference_logits(), t = reference_target(), w = reference_weight().

TEST_CASE("cross_entropy matches PyTorch for each reduction") {
  const Tensor x = reference_logits(), t = reference_target();
  test::check_close(F::cross_entropy(x, t), {1.22079338525}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.reduction = Reduction::none}),
                    {0.414610759465, 0.785745599817, 0.507047580656, 3.17576960106}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.reduction = Reduction::sum}), {4.883173541}, kReferenceTolerance);
}

TEST_CASE("cross_entropy matches PyTorch with class weights, ignore_index and label smoothing") {
  const Tensor x = reference_logits(), t = reference_target(), w = reference_weight();
  test::check_close(F::cross_entropy(x, t, {.weight = w}), {1.03168705818}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.weight = w, .reduction = Reduction::none}),
                    {0.82922151893, 0.392872799909, 0.760571370985, 3.17576960106}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.ignore_index = 1}), {0.569134646646}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.label_smoothing = 0.2}), {1.42779338525}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.reduction = Reduction::none, .label_smoothing = 0.2}),
                    {0.778610759465, 0.997745599817, 0.855047580656, 3.07976960106}, kReferenceTolerance);
  const F::CrossEntropyOptions all{.weight = w, .ignore_index = 1, .label_smoothing = 0.2};
  test::check_close(F::cross_entropy(x, t, all), {0.734962566481}, kReferenceTolerance);
  test::check_close(
      F::cross_entropy(x, t, {.weight = w, .ignore_index = 1, .reduction = Reduction::sum, .label_smoothing = 0.2}),
      {2.93985026592}, kReferenceTolerance);
  test::check_close(
      F::cross_entropy(x, t, {.weight = w, .ignore_index = 1, .reduction = Reduction::none, .label_smoothing = 0.2}),
      {1.10596691134, 0.784591219084, 1.0492921355, 0.0}, kReferenceTolerance);
}

TEST_CASE("cross_entropy's gradient matches PyTorch with weights, ignore_index and label smoothing") {
  const Tensor x = reference_logits().requires_grad_();
  F::cross_entropy(x, reference_target(), {.weight = reference_weight(), .ignore_index = 1, .label_smoothing = 0.2})
      .backward();
  test::check_close(x.grad(),
                    {0.0625088313847,
                     0.00233275122204,
                     -0.117446408232,
                     0.040271556359,
                     0.012333269266,
                     -0.0329868001682,
                     0.00962588647227,
                     -0.00922908513536,
                     0.02452168202,
                     0.00806831681127,
                     -0.000176569457341,
                     0.0617713524683,
                     0.0193889533728,
                     -0.099386941422,
                     0.0184032050382,
                     0,
                     0,
                     0,
                     0,
                     0},
                    kReferenceTolerance);
}

TEST_CASE("cross_entropy over [N, C, d] input matches PyTorch") {
  const Tensor x = reference_nd_logits(), t = reference_nd_target();
  test::check_close(F::cross_entropy(x, t, {.ignore_index = -1}), {1.52998984041}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.ignore_index = -1, .reduction = Reduction::none}),
                    {2.18981390858, 0.0, 1.12967500588, 1.27048060678}, kReferenceTolerance);
  test::check_close(F::cross_entropy(x, t, {.ignore_index = -1, .label_smoothing = 0.1}), {1.50776761819},
                    kReferenceTolerance);
}

TEST_CASE("nll_loss on log_softmax matches PyTorch") {
  const Tensor log_probs = log_softmax(reference_logits(), 1);
  test::check_close(F::nll_loss(log_probs, reference_target(), {.weight = reference_weight(), .ignore_index = 1}),
                    {0.495666422456}, kReferenceTolerance);
}

// ---- shapes and edge cases ----

TEST_CASE("cross_entropy takes one sample as [C] scores and a 0-dim target") {
  const Tensor x = reference_logits().select(0, 3), t = scalar_tensor(1.0, {DType::i64});
  test::check_close(F::cross_entropy(x, t), {3.17576960106}, kReferenceTolerance);
  const Tensor rows = F::cross_entropy(x, t, {.reduction = Reduction::none});
  CHECK(rows.dim() == 0);
}

TEST_CASE("a mean over only ignored targets is NaN, as in PyTorch") {
  const Tensor t = full({4}, -100, {DType::i64});
  CHECK(std::isnan(F::cross_entropy(reference_logits(), t).item()));
  CHECK(F::cross_entropy(reference_logits(), t, {.reduction = Reduction::sum}).item() == 0.0);
}

TEST_CASE("a target out of range names the value and the number of classes") {
  const Tensor x = reference_logits();
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, tensor(std::vector<int64_t>{0, 5, 1, 2})),
                       doctest::Contains("target 5 is out of range for 5 classes"), Error);
  CHECK_THROWS_WITH_AS(F::nll_loss(x, tensor(std::vector<int64_t>{0, -3, 1, 2})),
                       doctest::Contains("nll_loss: target -3 is out of range for 5 classes"), Error);
  // ignore_index may lie outside [0, C)
  CHECK_NOTHROW(F::cross_entropy(x, tensor(std::vector<int64_t>{0, -7, 1, 2}), {.ignore_index = -7}));
}

TEST_CASE("cross_entropy rejects mismatched shapes and dtypes naming both shapes") {
  const Tensor x = reference_logits();
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, tensor(std::vector<int64_t>{0, 1, 2})),
                       doctest::Contains("target of shape [3] does not match input of shape [4, 5]"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, tensor(std::vector<float>{0, 1, 2, 3})), doctest::Contains("i64"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, reference_target(), {.weight = ones({4}, {DType::f64})}),
                       doctest::Contains("weight of shape [4]"), Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, reference_target(), {.label_smoothing = 1.5}),
                       doctest::Contains("label_smoothing"), Error);
}

// ---- the fused kernels against the composite formula ----

TEST_CASE("fused cross_entropy equals the composite formula on odd shapes and strided inputs") {
  struct Case {
    Tensor logits;
    Shape target_shape;
  };
  const Case cases[] = {
      {test::rand_input({7, 13}, -3, 3), {7}},
      {test::rand_input({3, 5, 4, 2}, -3, 3), {3, 4, 2}},
      {test::noncontiguous_input({6, 11}, -3, 3), {6}},  // rows strided
      {test::rand_input({2, 4, 3, 5}, -3, 3).detach().permute({0, 3, 1, 2}).requires_grad_(),
       {2, 4, 3}},  // [2, 5, 4, 3]
  };
  for (const Case& c : cases) {
    Tensor logits = c.logits;
    const int64_t C = logits.size(1);
    const Tensor target = random_target(c.target_shape, C, -100);
    const Tensor weight = rand({C}, {DType::f64}, &test::rng()) + 0.5;
    for (Reduction reduction : kReductions) {
      for (double smoothing : {0.0, 0.3}) {
        const F::CrossEntropyOptions options{.weight = weight, .reduction = reduction, .label_smoothing = smoothing};
        INFO("logits ", shape_str(logits.sizes()), " strides ", shape_str(logits.strides()), ", reduction ",
             static_cast<int>(reduction), ", smoothing ", smoothing);
        const Tensor fused = F::cross_entropy(logits, target, options);
        const Tensor composite = composite_cross_entropy(logits, target, options);
        // f64 sums of a few dozen terms: exact to ~1e-14
        CHECK(test::max_abs_diff(fused, composite) < 1e-12);
        const Tensor g = rand_like(fused, &test::rng());
        (fused * g).sum().backward();
        const Tensor fused_grad = logits.grad().clone();
        logits.set_grad(Tensor());
        (composite * g).sum().backward();
        CHECK(test::max_abs_diff(fused_grad, logits.grad()) < 1e-12);
        logits.set_grad(Tensor());
      }
    }
  }
}

TEST_CASE("fused cross_entropy in f32 agrees with f64 to f32 precision") {
  const Tensor logits = test::rand_input({9, 17}, -4, 4).detach();
  const Tensor target = random_target({9}, 17, -100);
  const Tensor in_f32 = logits.to(DType::f32);
  const double f32_loss = F::cross_entropy(in_f32, target, {.label_smoothing = 0.1}).item();
  const double f64_loss = F::cross_entropy(logits, target, {.label_smoothing = 0.1}).item();
  // inputs rounded to f32 (relative 6e-8) move a loss of order 1 by well under 1e-5
  CHECK(std::abs(f32_loss - f64_loss) < 1e-5);
}

// ---- gradients against finite differences ----

TEST_CASE("cross_entropy passes gradcheck with weights, ignore_index, smoothing and every reduction") {
  const Tensor weight = rand({4}, {DType::f64}, &test::rng()) + 0.5;
  const Tensor target = random_target({5}, 4, 2);  // ignore_index 2 is also a class
  const Tensor nd_target = random_target({3, 2, 2}, 4, -100);
  for (Reduction reduction : kReductions) {
    for (double smoothing : {0.0, 0.25}) {
      INFO("reduction ", static_cast<int>(reduction), ", smoothing ", smoothing);
      CHECK_GRADCHECK(
          [&](const TensorList& in) {
            return F::cross_entropy(
                in[0], target,
                {.weight = weight, .ignore_index = 2, .reduction = reduction, .label_smoothing = smoothing});
          },
          {test::rand_input({5, 4}, -2, 2)});
      CHECK_GRADCHECK(
          [&](const TensorList& in) {
            return F::cross_entropy(in[0], nd_target, {.reduction = reduction, .label_smoothing = smoothing});
          },
          {test::rand_input({3, 4, 2, 2}, -2, 2)});
    }
  }
}

TEST_CASE("nll_loss passes gradcheck for every reduction") {
  const Tensor weight = rand({3}, {DType::f64}, &test::rng()) + 0.5;
  const Tensor target = random_target({6}, 3, -100);
  for (Reduction reduction : kReductions)
    CHECK_GRADCHECK(
        [&](const TensorList& in) { return F::nll_loss(in[0], target, {.weight = weight, .reduction = reduction}); },
        {test::rand_input({6, 3}, -3, 0)});
}

// ---- mse_loss ----

TEST_CASE("mse_loss averages, sums or keeps the squared differences") {
  const Tensor a = tensor(std::vector<double>{1, 2, 3, 4}, {2, 2});
  const Tensor b = tensor(std::vector<double>{0, 2, 5, 1}, {2, 2});
  CHECK(test::values(F::mse_loss(a, b, Reduction::none)) == std::vector<double>{1, 0, 4, 9});
  CHECK(F::mse_loss(a, b, Reduction::sum).item() == 14.0);
  CHECK(F::mse_loss(a, b).item() == 3.5);
  CHECK_THROWS_WITH_AS(F::mse_loss(a, b.reshape({4})),
                       doctest::Contains("input of shape [2, 2] and target of shape [4]"), Error);
}

TEST_CASE("mse_loss passes gradcheck for input and target") {
  for (Reduction reduction : kReductions)
    CHECK_GRADCHECK([&](const TensorList& in) { return F::mse_loss(in[0], in[1], reduction); },
                    {test::rand_input({3, 4}), test::noncontiguous_input({3, 4})});
}

// ---- loss modules ----

TEST_CASE("CrossEntropyLoss and MSELoss modules equal their functions") {
  const Tensor x = reference_logits(), t = reference_target();
  nn::CrossEntropyLoss criterion({.label_smoothing = 0.2});
  CHECK(criterion(x, t).item() == F::cross_entropy(x, t, {.label_smoothing = 0.2}).item());
  nn::MSELoss mse(Reduction::sum);
  CHECK(mse(x, x * 2).item() == F::mse_loss(x, x * 2, Reduction::sum).item());
}
