// The tiled transposing copy (Note [Tiled transposing copy]) against element-by-element indexing.
#include "helpers.h"

using namespace sg;

namespace {
// x[i, j, k] read through x's own strides, without any copy kernel.
double at(const Tensor& x, int64_t i, int64_t j, int64_t k) {
  const float* base = static_cast<const float*>(x.raw_data());
  return base[i * x.stride(0) + j * x.stride(1) + k * x.stride(2)];
}
}  // namespace

TEST_CASE("contiguous of permuted tensors matches indexing on odd shapes") {
  const Tensor x = randn({3, 45, 70}, {}, &test::rng());
  for (const Shape& order : {Shape{0, 2, 1}, Shape{2, 1, 0}, Shape{1, 2, 0}, Shape{2, 0, 1}}) {
    const Tensor view = x.permute(order);
    const Tensor copy = view.contiguous();
    REQUIRE(copy.is_contiguous());
    const float* data = copy.data_ptr<float>();
    int64_t n = 0, mismatches = 0;
    for (int64_t i = 0; i < view.size(0); ++i)
      for (int64_t j = 0; j < view.size(1); ++j)
        for (int64_t k = 0; k < view.size(2); ++k) mismatches += data[n++] != at(view, i, j, k);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("a transposing copy converts dtypes on the way") {
  const Tensor x = randn({40, 33}, {}, &test::rng());
  const Tensor converted = x.t().to(DType::f64).contiguous();
  const double* data = converted.data_ptr<double>();
  int64_t mismatches = 0;
  for (int64_t i = 0; i < 33; ++i)
    for (int64_t j = 0; j < 40; ++j)
      mismatches += data[i * 40 + j] != static_cast<double>(x.data_ptr<float>()[j * 33 + i]);
  CHECK(mismatches == 0);
}

TEST_CASE("a transposing copy gives the same bits on 1 and 2 threads") {
  const Tensor x = randn({8, 300, 200}, {}, &test::rng());
  set_num_threads(1);
  const Tensor one = x.transpose(1, 2).contiguous();
  set_num_threads(2);
  const Tensor two = x.transpose(1, 2).contiguous();
  CHECK(test::max_abs_diff(one, two) == 0.0);
}
