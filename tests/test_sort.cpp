// sort, argsort and topk: hand-computed results, a brute-force stable sort on strided inputs with
// ties and NaN, gradients against finite differences, thread-count independence and errors; the
// Tensor methods x.sort / x.argsort / x.topk against the free functions.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "helpers.h"

using namespace sg;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor f64(const std::vector<double>& values, const Shape& shape = {}) { return tensor(values, shape); }

std::vector<double> indices_of(const Tensor& t) { return test::values(t); }

// The rows of t along `dim` (dim moved last, then row-major), as f64.
std::vector<std::vector<double>> rows_along(const Tensor& t, int64_t dim) {
  const Tensor moved = t.detach().transpose(dim, -1).contiguous();
  const std::vector<double> flat = test::values(moved);
  const int64_t length = moved.size(-1);
  std::vector<std::vector<double>> rows(numel_of(Shape(moved.sizes().begin(), moved.sizes().end() - 1)));
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto start = flat.begin() + static_cast<int64_t>(r) * length;
    rows[r].assign(start, start + length);
  }
  return rows;
}

// The order a stable sort gives by PyTorch's rules, written the obvious way: NaN above
// everything (so last ascending, first descending), -0 equal to +0, ties in their original order.
std::vector<double> reference_order(const std::vector<double>& row, bool descending) {
  std::vector<int64_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  auto less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t i, int64_t j) { return descending ? less(row[j], row[i]) : less(row[i], row[j]); });
  return std::vector<double>(order.begin(), order.end());
}

// Small integers as f32, so that most rows hold ties, with a few NaN, seen through a transposed
// (non-contiguous) view.
Tensor tied_input(const Shape& shape) {
  Tensor values = randint(-3, 4, shape, {DType::i64}, &test::rng()).to(DType::f64);
  double* data = values.data_ptr<double>();
  for (int64_t i = 0; i < values.numel(); i += 17) data[i] = kNaN;
  return values.to(DType::f32).transpose(0, 1).contiguous().transpose(0, 1);
}

// Checks that `indices` along `dim` are the first k positions of the stable order of x's rows,
// and that `values` are the elements they name.
void check_against_reference(const Tensor& x, const Tensor& values, const Tensor& indices, int64_t dim,
                             bool descending) {
  const auto x_rows = rows_along(x, dim), index_rows = rows_along(indices, dim), value_rows = rows_along(values, dim);
  REQUIRE(x_rows.size() == index_rows.size());
  for (size_t r = 0; r < x_rows.size(); ++r) {
    CAPTURE(r);
    std::vector<double> expected = reference_order(x_rows[r], descending);
    expected.resize(index_rows[r].size());
    CHECK(index_rows[r] == expected);
    for (size_t j = 0; j < expected.size(); ++j) {
      const double want = x_rows[r][static_cast<size_t>(expected[j])], got = value_rows[r][j];
      CHECK((got == want || (std::isnan(got) && std::isnan(want))));
    }
  }
}

// Runs fn once on 1 thread and once on 2, and checks the results are bit-identical.
void check_same_for_any_thread_count(const std::function<Tensor()>& fn) {
  Tensor serial, parallel;
  {
    test::NumThreadsGuard one(1);
    serial = fn();
  }
  {
    test::NumThreadsGuard two(2);
    parallel = fn();
  }
  CHECK(test::values(serial) == test::values(parallel));
}

// Same dtype, shape and elements (NaN where the other has NaN).
void check_identical(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == want.dtype());
  CHECK(got.sizes() == want.sizes());
  const std::vector<double> got_values = test::values(got), want_values = test::values(want);
  REQUIRE(got_values.size() == want_values.size());
  for (size_t i = 0; i < got_values.size(); ++i) {
    CAPTURE(i);
    CHECK((got_values[i] == want_values[i] || (std::isnan(got_values[i]) && std::isnan(want_values[i]))));
  }
}

// The gradient that reaches x through `values_of(x)` weighted by `weights`, on a fresh leaf.
Tensor gradient_through(const Tensor& x, const Tensor& weights, const std::function<Tensor(const Tensor&)>& values_of) {
  const Tensor leaf = x.detach().requires_grad_();
  (values_of(leaf) * weights).sum().backward();
  return leaf.grad();
}

}  // namespace

// ---- sort, argsort ----

TEST_CASE("sort orders each row ascending or descending, with the indices of the values") {
  const Tensor x = f64({3, 1, 2, 9, 7, 8}, {2, 3});
  const auto [values, indices] = sort(x);
  CHECK(values.sizes() == Shape{2, 3});
  CHECK(indices.dtype() == DType::i64);
  CHECK(test::values(values) == std::vector<double>{1, 2, 3, 7, 8, 9});
  CHECK(indices_of(indices) == std::vector<double>{1, 2, 0, 1, 2, 0});
  const auto [down, down_indices] = sort(x, 0, /*descending=*/true);
  CHECK(test::values(down) == std::vector<double>{9, 7, 8, 3, 1, 2});
  CHECK(indices_of(down_indices) == std::vector<double>{1, 1, 1, 0, 0, 0});
  CHECK(indices_of(argsort(x, 0, true)) == indices_of(down_indices));
}

TEST_CASE("sort is stable: equal values keep their original order, ascending and descending") {
  const Tensor x = f64({2, 1, 2, 1, 2});
  CHECK(indices_of(argsort(x)) == std::vector<double>{1, 3, 0, 2, 4});
  CHECK(indices_of(argsort(x, -1, /*descending=*/true)) == std::vector<double>{0, 2, 4, 1, 3});
  CHECK(indices_of(argsort(x, -1, false, /*stable=*/true)) == std::vector<double>{1, 3, 0, 2, 4});
}

TEST_CASE("sort puts NaN above inf (last ascending, first descending) and ties -0 with +0") {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = f64({kNaN, 1, inf, -0.0, -inf, 0.0, kNaN});
  CHECK(indices_of(argsort(x)) == std::vector<double>{4, 3, 5, 1, 2, 0, 6});
  CHECK(indices_of(argsort(x, 0, true)) == std::vector<double>{0, 6, 2, 1, 3, 5, 4});
}

TEST_CASE("sort orders integers, negative ones included, and bools") {
  const Tensor ints = tensor(std::vector<int64_t>{5, -7, 0, std::numeric_limits<int64_t>::min(), 3});
  const auto [values, indices] = sort(ints);
  CHECK(values.dtype() == DType::i64);
  CHECK(indices_of(indices) == std::vector<double>{3, 1, 2, 4, 0});
  const Tensor flags = f64({1, 0, 1, 0}).gt(zeros({1}, {DType::f64}));
  CHECK(indices_of(argsort(flags)) == std::vector<double>{1, 3, 0, 2});
  CHECK(indices_of(argsort(tensor(std::vector<int32_t>{3, -1, 2}), 0, true)) == std::vector<double>{0, 2, 1});
}

TEST_CASE("sort agrees with a brute-force stable sort along every dim of a strided input with ties and NaN") {
  const Tensor x = tied_input({7, 5, 3});
  REQUIRE_FALSE(x.is_contiguous());
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (bool descending : {false, true}) {
      CAPTURE(dim);
      CAPTURE(descending);
      const auto [values, indices] = sort(x, dim, descending);
      CHECK(values.sizes() == x.sizes());
      check_against_reference(x, values, indices, dim, descending);
    }
  }
  const Tensor long_row = tied_input({1001, 1}).squeeze(1);  // one odd-length row
  const auto [values, indices] = sort(long_row, 0, true);
  check_against_reference(long_row, values, indices, 0, true);
}

TEST_CASE("sort of a 0-dim tensor gives it back with index 0, and of an empty dim gives empty results") {
  const auto [value, index] = sort(scalar_tensor(4.0));
  CHECK(value.dim() == 0);
  CHECK(value.item() == 4.0);
  CHECK(index.dim() == 0);
  CHECK(index.item<int64_t>() == 0);
  const auto [values, indices] = sort(zeros({3, 0}), 1);
  CHECK(values.sizes() == Shape{3, 0});
  CHECK(indices.sizes() == Shape{3, 0});
}

TEST_CASE("sort values gradient matches finite differences and goes back to where each value came from") {
  for (int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    CHECK_GRADCHECK([dim](const TensorList& in) { return sort(in[0], dim, /*descending=*/dim == 1).first; },
                    {test::noncontiguous_input({4, 6})});
  }
  Tensor x = f64({3, 1, 2}).requires_grad_();
  (sort(x).first * f64({10, 20, 30})).sum().backward();
  CHECK(test::values(x.grad()) == std::vector<double>{30, 10, 20});
}

TEST_CASE("sort gives the same bits for any thread count") {
  const Tensor x = tied_input({300, 257});
  check_same_for_any_thread_count([&] { return argsort(x, 1, true); });
  check_same_for_any_thread_count([&] { return argsort(x, 0); });
}

// ---- topk ----

TEST_CASE("topk returns the k largest or smallest along a dim, in sorted order") {
  const Tensor x = f64({4, 9, 1, 7, 3, 2, 8, 6}, {2, 4});
  const auto [values, indices] = topk(x, 2);
  CHECK(values.sizes() == Shape{2, 2});
  CHECK(test::values(values) == std::vector<double>{9, 7, 8, 6});
  CHECK(indices_of(indices) == std::vector<double>{1, 3, 2, 3});
  const auto [smallest, smallest_indices] = topk(x, 1, 0, /*largest=*/false);
  CHECK(smallest.sizes() == Shape{1, 4});
  CHECK(test::values(smallest) == std::vector<double>{3, 2, 1, 6});
  CHECK(indices_of(smallest_indices) == std::vector<double>{1, 1, 0, 1});
  // sorted = false is accepted; the result still comes sorted
  CHECK(test::values(topk(x, 3, -1, true, /*sorted=*/false).first) == std::vector<double>{9, 7, 4, 8, 6, 3});
}

TEST_CASE("topk equals the first k of a stable sort on strided inputs: ties picked by position, NaN as largest") {
  const Tensor x = tied_input({9, 11, 3});
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (int64_t k : {int64_t(0), int64_t(1), x.size(dim) / 2, x.size(dim)}) {
      for (bool largest : {true, false}) {
        CAPTURE(dim);
        CAPTURE(k);
        CAPTURE(largest);
        const auto [values, indices] = topk(x, k, dim, largest);
        Shape shape = x.sizes();
        shape[dim] = k;
        CHECK(values.sizes() == shape);
        check_against_reference(x, values, indices, dim, largest);
      }
    }
  }
}

TEST_CASE("topk values gradient matches finite differences and reaches only the chosen positions") {
  CHECK_GRADCHECK([](const TensorList& in) { return topk(in[0], 3, 0).first; }, {test::noncontiguous_input({7, 4})});
  CHECK_GRADCHECK([](const TensorList& in) { return topk(in[0], 2, -1, /*largest=*/false).first; },
                  {test::rand_input({3, 5})});
  Tensor x = f64({5, 1, 4, 2}).requires_grad_();
  topk(x, 2).first.sum().backward();
  CHECK(test::values(x.grad()) == std::vector<double>{1, 0, 1, 0});
}

TEST_CASE("topk of a 0-dim tensor takes k = 0 or 1") {
  const auto [value, index] = topk(scalar_tensor(2.5), 1);
  CHECK(value.dim() == 0);
  CHECK(value.item() == 2.5);
  CHECK(index.item<int64_t>() == 0);
  CHECK(topk(scalar_tensor(2.5), 0).first.numel() == 0);
  CHECK_THROWS_AS(topk(scalar_tensor(2.5), 2), Error);
}

TEST_CASE("topk rejects k outside [0, size of dim], naming k and the size, a bad dim names the dim") {
  const Tensor x = zeros({3, 5});
  CHECK_THROWS_WITH_AS(topk(x, 6), doctest::Contains("topk: k = 6 is out of range for dim 1 of shape [3, 5] (size 5)"),
                       Error);
  CHECK_THROWS_WITH_AS(topk(x, 4, 0), doctest::Contains("k = 4 is out of range for dim 0 of shape [3, 5] (size 3)"),
                       Error);
  CHECK_THROWS_WITH_AS(topk(x, -1), doctest::Contains("k = -1 is out of range"), Error);
  CHECK_THROWS_WITH_AS(topk(x, 1, 2), doctest::Contains("topk: dim 2 out of range"), Error);
  CHECK_THROWS_WITH_AS(sort(x, -3), doctest::Contains("sort: dim -3 out of range"), Error);
}

TEST_CASE("topk gives the same bits for any thread count") {
  const Tensor x = tied_input({513, 130});
  check_same_for_any_thread_count([&] { return topk(x, 7, 1).second; });
  check_same_for_any_thread_count([&] { return topk(x, 20, 0, false).second; });
}

// ---- Tensor methods ----

TEST_CASE("x.sort, x.argsort and x.topk give what the free functions give, defaults included") {
  const Tensor x = tied_input({7, 5, 3});
  for (int64_t dim : {0, 1, -1}) {
    for (bool flag : {false, true}) {
      CAPTURE(dim);
      CAPTURE(flag);
      const auto [values, indices] = x.sort(dim, /*descending=*/flag, /*stable=*/true);
      const auto [want_values, want_indices] = sort(x, dim, flag, true);
      check_identical(values, want_values);
      check_identical(indices, want_indices);
      check_identical(x.argsort(dim, flag), argsort(x, dim, flag));
      const auto [top_values, top_indices] = x.topk(2, dim, /*largest=*/flag, /*sorted=*/true);
      const auto [want_top_values, want_top_indices] = topk(x, 2, dim, flag);
      check_identical(top_values, want_top_values);
      check_identical(top_indices, want_top_indices);
    }
  }
  // Defaults: dim -1, ascending for sort and argsort, largest for topk.
  check_identical(x.sort().first, sort(x).first);
  check_identical(x.argsort(), argsort(x));
  check_identical(x.topk(3).second, topk(x, 3).second);
  CHECK_THROWS_WITH_AS(x.topk(4), doctest::Contains("topk: k = 4 is out of range for dim 2"), Error);
}

TEST_CASE("x.sort and x.topk values carry the free functions' gradients") {
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].sort(0, /*descending=*/true).first; },
                  {test::noncontiguous_input({4, 6})});
  CHECK_GRADCHECK([](const TensorList& in) { return in[0].topk(2, -1, /*largest=*/false).first; },
                  {test::noncontiguous_input({3, 5})});
  const Tensor x = test::noncontiguous_input({6, 5}).detach(), weights = test::rand_input({6, 5}).detach();
  CHECK(test::values(gradient_through(x, weights, [](const Tensor& t) { return t.sort(1).first; })) ==
        test::values(gradient_through(x, weights, [](const Tensor& t) { return sort(t, 1).first; })));
  const Tensor top_weights = weights.narrow(0, 0, 3);
  CHECK(test::values(gradient_through(x, top_weights, [](const Tensor& t) { return t.topk(3, 0, false).first; })) ==
        test::values(gradient_through(x, top_weights, [](const Tensor& t) { return topk(t, 3, 0, false).first; })));
}
