// Shape ops: views share storage with their base, the others copy; every one is differentiable
// (as_strided excepted) and checked against finite differences, alone and chained.
#include <algorithm>
#include <functional>

#include "helpers.h"

using namespace sg;

namespace {

// 0, 1, ..., 23 as f32 in a [2, 3, 4] contiguous tensor.
Tensor base_tensor() { return arange(24, {DType::f32}).reshape({2, 3, 4}); }

struct ViewCase {
  const char* name;
  std::function<Tensor(const Tensor&)> make;  // a view of the [2, 3, 4] base
  std::vector<double> expected;               // its values, row-major
};

// Every view op applied to base_tensor(), with the values it must show.
std::vector<ViewCase> view_cases() {
  return {
      {"view",
       [](const Tensor& x) {
         return x.view({6, -1}).select(0, 5);
       },
       {20, 21, 22, 23}},
      {"reshape",
       [](const Tensor& x) {
         return x.reshape({4, 6}).select(1, 0);
       },
       {0, 6, 12, 18}},
      {"permute",
       [](const Tensor& x) {
         return x.permute({2, 0, 1}).select(0, 1).select(0, 1);
       },
       {13, 17, 21}},
      {"transpose", [](const Tensor& x) { return x.transpose(0, 2).select(2, 1).select(1, 2); }, {20, 21, 22, 23}},
      {"unsqueeze", [](const Tensor& x) { return x.unsqueeze(1).select(3, 3).select(0, 0).select(0, 0); }, {3, 7, 11}},
      {"squeeze", [](const Tensor& x) { return x.narrow(1, 2, 1).squeeze().select(1, 0); }, {8, 20}},
      {"expand",
       [](const Tensor& x) {
         return x.select(0, 1).narrow(0, 0, 1).narrow(1, 0, 2).expand({3, 2});
       },
       {12, 13, 12, 13, 12, 13}},
      {"narrow", [](const Tensor& x) { return x.narrow(2, -2, 2).select(0, 0).select(0, 0); }, {2, 3}},
      {"slice", [](const Tensor& x) { return x.slice(2, 0, 4, 3).select(0, 1).select(0, 2); }, {20, 23}},
      {"slice with negative bounds",
       [](const Tensor& x) { return x.slice(1, -2, -1).select(0, 0).select(0, 0); },
       {4, 5, 6, 7}},
      {"select", [](const Tensor& x) { return x.select(1, -1).select(0, 0); }, {8, 9, 10, 11}},
      {"flatten", [](const Tensor& x) { return x.flatten(1).select(0, 1).slice(0, 10, 12); }, {22, 23}},
      {"as_strided",
       [](const Tensor& x) {
         return as_strided(x, {3, 2}, {1, 1}, 4);
       },
       {4, 5, 5, 6, 6, 7}},
  };
}

Tensor f64_input(const Shape& shape) { return test::rand_input(shape); }

}  // namespace

// ---- views share storage ----

TEST_CASE("every view op shows the right elements and shares the base's storage") {
  for (const ViewCase& c : view_cases()) {
    INFO(c.name);
    const Tensor base = base_tensor();
    Tensor v = c.make(base);
    CHECK(v.storage() == base.storage());
    CHECK(test::values(v) == c.expected);
  }
}

TEST_CASE("a write through a view is visible in the base") {
  for (const ViewCase& c : view_cases()) {
    INFO(c.name);
    const Tensor base = base_tensor();
    Tensor v = c.make(base);
    v.fill_(-1);
    // Exactly the elements the view shows (by their original values) became -1.
    const auto after = test::values(base);
    for (int64_t i = 0; i < 24; ++i) {
      const bool in_view = std::find(c.expected.begin(), c.expected.end(), double(i)) != c.expected.end();
      CHECK(after[i] == (in_view ? -1.0 : double(i)));
    }
  }
  // In-place arithmetic on a view writes through too.
  Tensor base = zeros({3, 3});
  Tensor column = base.select(1, 1);
  column.add_(tensor(std::vector<float>{1, 2, 3}));
  column.mul_(2.0);
  CHECK(test::values(base) == std::vector<double>{0, 2, 0, 0, 4, 0, 0, 6, 0});
}

TEST_CASE("slice follows Python's rules for steps and out-of-range bounds") {
  const Tensor x = arange(10);
  CHECK(test::values(x.slice(0, 1, 10, 3)) == std::vector<double>{1, 4, 7});
  CHECK(test::values(x.slice(0, -3, 10)) == std::vector<double>{7, 8, 9});
  CHECK(test::values(x.slice(0, 2, -5)) == std::vector<double>{2, 3, 4});
  CHECK(test::values(x.slice(0, -100, 100, 4)) == std::vector<double>{0, 4, 8});
  CHECK(x.slice(0, 6, 2).numel() == 0);
  CHECK(x.slice(0, 9, 10, 5).sizes() == Shape{1});
  CHECK_THROWS_WITH_AS(x.slice(0, 0, 5, 0), "slice: step must be positive, got 0", Error);
  CHECK_THROWS_WITH_AS(x.narrow(0, 8, 3), "narrow: range [8, 11) is out of bounds for dim 0 of shape [10]", Error);
  CHECK_THROWS_WITH_AS(x.select(0, 10), "select: index 10 is out of range for dim 0 of shape [10]", Error);
}

TEST_CASE("squeeze, unsqueeze, expand, flatten and permute produce the documented shapes") {
  const Tensor x = zeros({2, 1, 3, 1});
  CHECK(x.squeeze().sizes() == Shape{2, 3});
  CHECK(x.squeeze(1).sizes() == Shape{2, 3, 1});
  CHECK(x.squeeze(0).sizes() == Shape{2, 1, 3, 1});  // not size 1: unchanged
  CHECK(x.squeeze(-1).sizes() == Shape{2, 1, 3});
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 2, 1, 3, 1});
  CHECK(x.unsqueeze(-1).sizes() == Shape{2, 1, 3, 1, 1});
  CHECK(x.expand({4, 2, 5, 3, -1}).sizes() == Shape{4, 2, 5, 3, 1});
  CHECK(x.expand({4, 2, 5, 3, -1}).stride(0) == 0);
  CHECK(x.flatten().sizes() == Shape{6});
  CHECK(x.flatten(1, 2).sizes() == Shape{2, 3, 1});
  CHECK(scalar_tensor(1).flatten().sizes() == Shape{1});
  CHECK(x.permute({3, 0, 2, 1}).sizes() == Shape{1, 2, 3, 1});
  CHECK(zeros({2, 3}).t().sizes() == Shape{3, 2});
  CHECK_THROWS_WITH_AS(x.expand({3, 1, 3, 1}),
                       "expand: shape [2, 1, 3, 1] cannot be expanded to [3, 1, 3, 1] (dim 0: 2 vs 3)", Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 1, 2}), "permute: dim 1 repeated in [0, 1, 1, 2]", Error);
  CHECK_THROWS_AS(x.unsqueeze(5), Error);
}

TEST_CASE("as_strided makes overlapping windows and checks the storage bounds") {
  const Tensor x = arange(6, {DType::f64});
  const Tensor windows = as_strided(x, {4, 3}, {1, 1}, 0);
  CHECK(test::values(windows) == std::vector<double>{0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5});
  CHECK(windows.storage() == x.storage());
  CHECK_THROWS_WITH_AS(as_strided(x, {4, 3}, {1, 1}, 1),
                       "as_strided: the view reaches element 6, beyond the storage of 6 elements", Error);
  CHECK_THROWS_AS(as_strided(f64_input({6}), {2}, {1}, 0), Error);  // not differentiable
}

// ---- reshape and view ----

TEST_CASE("reshape views a compatible layout and copies an incompatible one") {
  const Tensor x = arange(12).reshape({3, 4});
  CHECK(x.reshape({2, 6}).storage() == x.storage());
  // Selecting columns keeps rows contiguous: splitting the row dim is still a view.
  const Tensor columns = x.slice(1, 0, 2);
  CHECK(columns.reshape({3, 1, 2}).storage() == x.storage());
  CHECK(test::values(columns.reshape({3, 1, 2})) == std::vector<double>{0, 1, 4, 5, 8, 9});
  // A transpose cannot be flattened in place: reshape copies.
  const Tensor transposed = x.t();
  const Tensor flat = transposed.reshape({-1});
  CHECK(flat.storage() != x.storage());
  CHECK(test::values(flat) == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

TEST_CASE("view of an incompatible layout throws naming both shapes") {
  const Tensor transposed = arange(6).reshape({2, 3}).t();
  CHECK_THROWS_WITH_AS(transposed.view({6}),
                       "view: shape [6] is not compatible with the input's size [3, 2] and strides [1, 3]; use "
                       "reshape() (which copies)",
                       Error);
  CHECK_THROWS_WITH_AS(arange(6).view({4, -1}), "view: shape [4, -1] is invalid for input of shape [6]", Error);
  CHECK_THROWS_WITH_AS(arange(6).view({4}), "view: shape [4] is invalid for input of shape [6] (6 elements)", Error);
  CHECK_THROWS_WITH_AS(arange(6).view({-1, -1}), "view: only one dimension can be -1, got [-1, -1]", Error);
}

// ---- copies ----

TEST_CASE("contiguous returns the tensor itself when already contiguous, else a copy") {
  const Tensor x = arange(6).reshape({2, 3});
  CHECK(x.contiguous().is_same(x));
  const Tensor c = x.t().contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.storage() != x.storage());
  CHECK(test::values(c) == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("clone always copies into new contiguous memory") {
  const Tensor x = arange(6).reshape({2, 3});
  const Tensor c = x.clone();
  CHECK(c.storage() != x.storage());
  CHECK(c.is_contiguous());
  Tensor(c).fill_(0);
  CHECK(test::values(x) == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(test::values(x.t().clone()) == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("copy_ broadcasts and converts the source, and writes through views") {
  Tensor dst = zeros({2, 3}, {DType::i32});
  dst.copy_(tensor(std::vector<double>{1.9, -2.5, 3}));
  CHECK(test::values(dst) == std::vector<double>{1, -2, 3, 1, -2, 3});
  Tensor base = zeros({3, 3});
  Tensor diagonal_row = base.select(0, 1);
  diagonal_row.copy_(scalar_tensor(5.0, {DType::f64}));
  CHECK(test::values(base) == std::vector<double>{0, 0, 0, 5, 5, 5, 0, 0, 0});
  // A transposed source is read in its logical order.
  Tensor target = zeros({3, 2});
  target.copy_(arange(6).reshape({2, 3}).t());
  CHECK(test::values(target) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_WITH_AS(dst.copy_(zeros({3, 3})), "copy_: shapes [2, 3] and [3, 3] cannot be broadcast (dim 0: 2 vs 3)",
                       Error);
  Tensor row = zeros({3});
  CHECK_THROWS_WITH_AS(row.copy_(zeros({2, 3})),
                       "copy_: source of shape [2, 3] cannot be broadcast to the destination's shape [3]", Error);
}

// ---- gradients ----

TEST_CASE("every view op passes gradcheck") {
  const auto x = f64_input({2, 3, 4});
  using F = std::function<Tensor(const TensorList&)>;
  const std::vector<std::pair<const char*, F>> ops = {
      {"view",
       [](const TensorList& in) {
         return in[0].view({6, 4});
       }},
      {"reshape",
       [](const TensorList& in) {
         return in[0].reshape({4, -1});
       }},
      {"permute",
       [](const TensorList& in) {
         return in[0].permute({2, 0, 1});
       }},
      {"transpose", [](const TensorList& in) { return in[0].transpose(-1, 0); }},
      {"t", [](const TensorList& in) { return in[0].select(0, 1).t(); }},
      {"unsqueeze", [](const TensorList& in) { return in[0].unsqueeze(2); }},
      {"squeeze", [](const TensorList& in) { return in[0].narrow(1, 1, 1).squeeze(); }},
      {"squeeze dim", [](const TensorList& in) { return in[0].narrow(1, 1, 1).squeeze(1); }},
      {"expand",
       [](const TensorList& in) {
         return in[0].narrow(1, 0, 1).expand({3, 2, 5, 4});
       }},
      {"expand_as", [](const TensorList& in) { return in[0].narrow(2, 3, 1).expand_as(in[0]); }},
      {"narrow", [](const TensorList& in) { return in[0].narrow(2, -3, 2); }},
      {"slice", [](const TensorList& in) { return in[0].slice(2, 0, 4, 3); }},
      {"slice with negative bounds", [](const TensorList& in) { return in[0].slice(1, -2, -1); }},
      {"select", [](const TensorList& in) { return in[0].select(1, -1); }},
      {"flatten", [](const TensorList& in) { return in[0].flatten(0, 1); }},
      {"contiguous", [](const TensorList& in) { return in[0].transpose(0, 1).contiguous(); }},
      {"clone", [](const TensorList& in) { return in[0].clone(); }},
  };
  for (const auto& [name, fn] : ops) {
    INFO(name);
    CHECK_GRADCHECK(fn, {x});
  }
}

TEST_CASE("view ops pass gradcheck on non-contiguous inputs") {
  const auto x = test::noncontiguous_input({3, 4});
  REQUIRE_FALSE(x.is_contiguous());
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].reshape({2, 6}); }, {x});  // the copying path
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].view({3, 2, 2}); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].flatten(); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].slice(0, 1, 3).select(1, 2); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].unsqueeze(0).expand({2, 3, 4}); }, {x});
  const auto v = test::noncontiguous_input({5});
  REQUIRE_FALSE(v.is_contiguous());
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].reshape({5, 1}).expand({5, 3}); }, {v});
}

TEST_CASE("chains of views pass gradcheck, including an element reached twice") {
  const auto x = test::noncontiguous_input({4, 6});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        return in[0].t().reshape({3, 2, 4}).slice(2, 1, 4, 2).unsqueeze(0).expand({2, 3, 2, 2}).select(2, -1);
      },
      {x});
  // The same input used through two overlapping views: gradients add up.
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].narrow(0, 0, 3) * in[0].narrow(0, 1, 3); }, {x});
}

TEST_CASE("the gradient of a view lands in the viewed positions only") {
  Tensor x = f64_input({3, 4});
  x.slice(1, 1, 4, 2).select(0, 2).sum().backward();
  CHECK(test::values(x.grad()) == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1});
  Tensor y = f64_input({2});
  y.unsqueeze(1).expand({2, 5}).sum().backward();
  CHECK(test::values(y.grad()) == std::vector<double>{5, 5});
}

TEST_CASE("to(dtype) passes the gradient back in the original dtype") {
  Tensor x = tensor(std::vector<float>{1, 2, 3}).requires_grad_();
  Tensor y = x.to(DType::f64);
  CHECK(y.grad_fn() != nullptr);
  (y * y).sum().backward();
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(test::values(x.grad()) == std::vector<double>{2, 4, 6});
  CHECK(x.to(DType::i64).grad_fn() == nullptr);  // integers carry no gradient
}

TEST_CASE("copy_ sends the gradient to its source, reduced over broadcast dims") {
  Tensor src = f64_input({3});
  Tensor dst = zeros({2, 3}, {DType::f64});
  dst.copy_(src);
  (dst * tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3})).sum().backward();
  CHECK(test::values(src.grad()) == std::vector<double>{5, 7, 9});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        Tensor target = zeros({2, 3}, {DType::f64});
        target.copy_(in[0]);
        return target * 1.0;
      },
      {f64_input({3})});
  // Copying into part of a fresh tensor: the overwritten part gets no gradient from the old value.
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        Tensor target = in[1] * 1.0;
        target.copy_(in[0]);
        return target;
      },
      {f64_input({2, 3}), f64_input({2, 3})});
}

TEST_CASE("in-place ops refuse leaves that require grad and views of them") {
  Tensor leaf = f64_input({3});
  CHECK_THROWS_AS(leaf.add_(1.0), Error);
  Tensor result = leaf * 2.0;
  Tensor view = result.narrow(0, 0, 2);
  CHECK_THROWS_AS(view.mul_(2.0), Error);
  {
    NoGradGuard no_grad;
    leaf.add_(1.0);  // an optimizer step
  }
}
