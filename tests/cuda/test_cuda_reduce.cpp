// Reductions on the GPU (core/cuda/reduce.cu) against the CPU's: sum, mean, var, norm, logsumexp,
// max/min and their indices, over one, several and non-adjacent dims, with keepdim, strided
// inputs, empty reductions, NaN and infinities.
#include <cmath>
#include <limits>

#include "cuda_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor random(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

struct Case {
  Shape shape;
  Shape dims;  // {} reduces every dim
};
// Short rows (one thread per output) and long rows (a block per output, contiguous or strided),
// one dim, several, non-adjacent, every dim.
const Case kCases[] = {{{7, 5}, {1}},      {{7, 5}, {0}},        {{3, 4, 5, 6}, {0, 2}}, {{3, 4, 5, 6}, {1, 3}},
                       {{2, 3, 700}, {2}}, {{600, 5}, {0}},      {{5, 1, 7}, {0, 1}},    {{33, 17, 9}, {}},
                       {{4, 300, 3}, {1}}, {{9, 11, 13}, {0, 2}}};

const DType kFloating[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

TEST_CASE("sum, mean, var, norm and logsumexp over any dims match the CPU for every floating dtype") {
  for (const Case& c : kCases) {
    for (DType dtype : kFloating) {
      for (bool keepdim : {false, true}) {
        CAPTURE(shape_str(c.shape));
        CAPTURE(shape_str(c.dims));
        CAPTURE(dtype);
        CAPTURE(keepdim);
        const Tensor x = random(c.shape, dtype), xg = x.to(gpu());
        test::check_matches_cpu(xg.sum(c.dims, keepdim), x.sum(c.dims, keepdim));
        test::check_matches_cpu(xg.mean(c.dims, keepdim), x.mean(c.dims, keepdim));
        test::check_matches_cpu(xg.var(c.dims, true, keepdim), x.var(c.dims, true, keepdim));
        test::check_matches_cpu(xg.var(c.dims, false, keepdim), x.var(c.dims, false, keepdim));
        for (double p : {1.0, 2.0, 3.0, kInf}) {
          CAPTURE(p);
          test::check_matches_cpu(xg.norm(p, c.dims, keepdim), x.norm(p, c.dims, keepdim));
        }
        if (!c.dims.empty()) test::check_matches_cpu(xg.logsumexp(c.dims, keepdim), x.logsumexp(c.dims, keepdim));
      }
    }
  }
}

TEST_CASE("reductions read transposed and sliced GPU tensors in place, as the CPU reads them") {
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype);
    const Tensor base = random({6, 8, 300}, dtype), base_gpu = base.to(gpu());
    const Tensor views[] = {base.transpose(0, 2), base.slice(1, 1, 8, 3), base.permute({2, 0, 1}).slice(0, 0, 300, 2)};
    const Tensor gpu_views[] = {base_gpu.transpose(0, 2), base_gpu.slice(1, 1, 8, 3),
                                base_gpu.permute({2, 0, 1}).slice(0, 0, 300, 2)};
    for (size_t v = 0; v < 3; ++v) {
      CAPTURE(v);
      REQUIRE(!gpu_views[v].is_contiguous());
      for (const Shape& dims : {Shape{0}, Shape{1}, Shape{2}, Shape{0, 2}, Shape{}}) {
        CAPTURE(shape_str(dims));
        test::check_matches_cpu(gpu_views[v].sum(dims), views[v].sum(dims));
        test::check_matches_cpu(gpu_views[v].var(dims), views[v].var(dims));
        test::check_matches_cpu(amax(gpu_views[v], dims), amax(views[v], dims));
        if (!dims.empty()) test::check_matches_cpu(gpu_views[v].logsumexp(dims), views[v].logsumexp(dims));
      }
      const auto [values, indices] = gpu_views[v].max(1);
      const auto [cpu_values, cpu_indices] = views[v].max(1);
      test::check_matches_cpu(values, cpu_values);
      test::check_matches_cpu(indices, cpu_indices);
    }
  }
}

TEST_CASE("integer and bool sums accumulate in i64 exactly") {
  for (DType dtype : {DType::i64, DType::i32, DType::u8, DType::boolean}) {
    CAPTURE(dtype);
    const Tensor x =
        randint(0, dtype == DType::boolean ? 2 : 200, {5, 700, 3}, {DType::i64, Device::cpu()}, &test::rng()).to(dtype);
    const Tensor xg = x.to(gpu());
    for (const Shape& dims : {Shape{1}, Shape{0, 2}, Shape{}}) {
      CAPTURE(shape_str(dims));
      const Tensor result = xg.sum(dims);
      CHECK(result.dtype() == DType::i64);
      test::check_matches_cpu(result, x.sum(dims), 0.0);
    }
  }
}

TEST_CASE("max, min, argmax and argmin match the CPU, ties resolved to the first index") {
  // Values from {0, 1, 2}: every row has many ties for its max and its min.
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64, DType::i32, DType::u8}) {
    for (const Shape& shape : {Shape{6, 9}, Shape{4, 500}, Shape{3, 7, 400}}) {
      CAPTURE(dtype);
      CAPTURE(shape_str(shape));
      const Tensor x = randint(0, 3, shape, {DType::i64, Device::cpu()}, &test::rng()).to(dtype);
      const Tensor xg = x.to(gpu());
      for (int64_t dim = 0; dim < x.dim(); ++dim) {
        CAPTURE(dim);
        for (bool keepdim : {false, true}) {
          const auto [max_values, max_indices] = xg.max(dim, keepdim);
          const auto [cpu_max_values, cpu_max_indices] = x.max(dim, keepdim);
          test::check_matches_cpu(max_values, cpu_max_values, 0.0);
          test::check_matches_cpu(max_indices, cpu_max_indices, 0.0);
          const auto [min_values, min_indices] = xg.min(dim, keepdim);
          const auto [cpu_min_values, cpu_min_indices] = x.min(dim, keepdim);
          test::check_matches_cpu(min_values, cpu_min_values, 0.0);
          test::check_matches_cpu(min_indices, cpu_min_indices, 0.0);
        }
        test::check_matches_cpu(xg.argmax(dim), x.argmax(dim), 0.0);
        test::check_matches_cpu(xg.argmin(dim), x.argmin(dim), 0.0);
      }
      test::check_matches_cpu(xg.argmax(), x.argmax(), 0.0);  // over every element, flattened
      test::check_matches_cpu(xg.argmin(), x.argmin(), 0.0);
      test::check_matches_cpu(amax(xg, {0, x.dim() - 1}), amax(x, {0, x.dim() - 1}), 0.0);
      test::check_matches_cpu(amin(xg, {}), amin(x, {}), 0.0);
    }
  }
}

TEST_CASE("NaN propagates through max, min and logsumexp, and infinite rows give the CPU's logsumexp") {
  for (int64_t length : {9, 300}) {  // one thread per row, and one block per row
    CAPTURE(length);
    std::vector<double> data = test::values(randn({4, length}, {DType::f64, Device::cpu()}, &test::rng()));
    data[0 * length + 5] = kNaN;  // row 0: two NaNs, the first at 5
    data[0 * length + length - 1] = kNaN;
    for (int64_t i = 0; i < length; ++i) data[1 * length + i] = -kInf;  // row 1: all -inf
    data[2 * length + 3] = kInf;                                        // row 2: one +inf
    for (DType dtype : kFloating) {
      CAPTURE(dtype);
      const Tensor x = tensor(data, {4, length}).to(dtype), xg = x.to(gpu());
      const auto [values, indices] = xg.max(1);
      CHECK(test::values(indices.to(Device::cpu())) == std::vector<double>{5, 0, 3, test::values(x.argmax(1))[3]});
      const std::vector<double> max_values = test::values(values.to(Device::cpu()));
      CHECK(std::isnan(max_values[0]));
      CHECK(max_values[1] == -kInf);
      CHECK(max_values[2] == kInf);
      const auto [min_values, min_indices] = xg.min(1);
      CHECK(test::values(min_indices.to(Device::cpu()))[0] == 5);
      CHECK(std::isnan(test::values(min_values.to(Device::cpu()))[0]));
      const std::vector<double> lse = test::values(xg.logsumexp({1}).to(Device::cpu()));
      const std::vector<double> cpu_lse = test::values(x.logsumexp({1}));
      CHECK(std::isnan(lse[0]));
      CHECK(lse[1] == -kInf);
      CHECK(lse[2] == kInf);
      CHECK(std::abs(lse[3] - cpu_lse[3]) <= test::tolerance_for(dtype) * (std::abs(cpu_lse[3]) + 1));
    }
  }
}

TEST_CASE("reductions over an empty dim give the CPU's values, and reductions with no outputs launch nothing") {
  const Tensor x = zeros({3, 0}), xg = x.to(gpu());
  test::check_matches_cpu(xg.sum({1}), x.sum({1}));              // 0
  test::check_matches_cpu(xg.norm(2.0, {1}), x.norm(2.0, {1}));  // 0
  test::check_matches_cpu(xg.var({1}), x.var({1}));              // NaN
  CHECK(test::values(xg.logsumexp({1}).to(Device::cpu())) == std::vector<double>(3, -kInf));
  CHECK(xg.sum({0}).sizes() == Shape{0});
  CHECK(xg.t().logsumexp({1}).sizes() == Shape{0});
  const Tensor scalar = scalar_tensor(2.5);
  test::check_matches_cpu(scalar.to(gpu()).sum(), scalar.sum());
}

TEST_CASE("a GPU reduction gives the same bits on every run") {
  const Tensor x = random({3, 100000}, DType::f32).to(gpu());
  const std::vector<double> first = test::values(x.sum({1}).to(Device::cpu()));
  for (int run = 0; run < 3; ++run) CHECK(test::values(x.sum({1}).to(Device::cpu())) == first);
  const std::vector<double> total = test::values(x.sum().to(Device::cpu()));
  CHECK(test::values(x.sum().to(Device::cpu())) == total);
}
