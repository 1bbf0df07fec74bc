// Matrix products on the GPU (cuBLAS, core/cuda/gemm.cpp) against the CPU's.
#include <cmath>
#include <limits>

#include "backward_compare.h"
#include "core/cuda_runtime/runtime.h"
#include "core/kernels/gemm.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

const DType kFloatingDtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

Tensor random(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

// matmul(a, b) on the GPU against the CPU, a and b given as CPU tensors (views included).
void check_matmul(const Tensor& a, const Tensor& b) {
  test::check_matches_cpu(matmul(a.to(gpu()), b.to(gpu())), matmul(a, b));
}

}  // namespace

TEST_CASE("matmul of odd shapes matches the CPU for every floating dtype") {
  for (DType dtype : kFloatingDtypes) {
    CAPTURE(dtype);
    check_matmul(random({7, 13}, dtype), random({13, 5}, dtype));
    check_matmul(random({1, 13}, dtype), random({13, 1}, dtype));
    check_matmul(random({13}, dtype), random({13, 5}, dtype));
    check_matmul(random({65, 129}, dtype), random({129, 33}, dtype));
  }
}

TEST_CASE("matmul of transposed and strided views matches the CPU") {
  for (DType dtype : kFloatingDtypes) {
    CAPTURE(dtype);
    const Tensor a_t = random({13, 7}, dtype).t();  // unit stride down the rows: CUBLAS_OP_T
    const Tensor b_t = random({5, 13}, dtype).t();
    const Tensor a_strided = random({7, 26}, dtype).slice(1, 0, 26, 2);  // no unit stride: copied
    const Tensor b_columns = random({13, 9}, dtype).slice(1, 2, 7);      // a column range: ld 9
    check_matmul(a_t, b_t);
    check_matmul(a_strided, b_t);
    check_matmul(random({7, 13}, dtype), b_columns);
  }
}

TEST_CASE("batched and broadcast matmul matches the CPU") {
  for (DType dtype : kFloatingDtypes) {
    CAPTURE(dtype);
    check_matmul(random({3, 7, 13}, dtype), random({3, 13, 5}, dtype));                  // one strided batch
    check_matmul(random({3, 13, 7}, dtype).transpose(1, 2), random({3, 13, 5}, dtype));  // transposed batch
    check_matmul(random({2, 3, 7, 13}, dtype), random({13, 5}, dtype));                  // rows folded
    check_matmul(random({2, 1, 7, 13}, dtype), random({4, 13, 5}, dtype));               // stride-0 batch dims
    check_matmul(random({4, 2, 7, 13}, dtype).transpose(0, 1),
                 random({2, 4, 13, 5}, dtype));  // batch dims not mergeable
  }
}

TEST_CASE("addmm and baddbmm apply alpha and beta as on the CPU") {
  for (DType dtype : kFloatingDtypes) {
    CAPTURE(dtype);
    const Tensor input = random({5}, dtype), a = random({7, 13}, dtype), b = random({13, 5}, dtype);
    test::check_matches_cpu(addmm(input.to(gpu()), a.to(gpu()), b.to(gpu()), 0.5, 2.0), addmm(input, a, b, 0.5, 2.0));
    const Tensor batch_input = random({3, 7, 5}, dtype), ba = random({3, 7, 13}, dtype), bb = random({3, 13, 5}, dtype);
    test::check_matches_cpu(baddbmm(batch_input.to(gpu()), ba.to(gpu()), bb.to(gpu()), 0.25, -1.5),
                            baddbmm(batch_input, ba, bb, 0.25, -1.5));
  }
}

TEST_CASE("addmm with beta = 0 ignores a NaN input, as BLAS does") {
  const Tensor input = full({7, 5}, std::numeric_limits<double>::quiet_NaN());
  const Tensor a = random({7, 13}, DType::f32), b = random({13, 5}, DType::f32);
  const Tensor expected = addmm(input, a, b, 0.0, 1.0);
  for (double value : test::values(expected)) REQUIRE(!std::isnan(value));
  test::check_matches_cpu(addmm(input.to(gpu()), a.to(gpu()), b.to(gpu()), 0.0, 1.0), expected);
}

TEST_CASE("an empty inner dim leaves only the beta term") {
  const Tensor input = random({4, 3}, DType::f32), a = random({4, 0}, DType::f32), b = random({0, 3}, DType::f32);
  test::check_matches_cpu(addmm(input.to(gpu()), a.to(gpu()), b.to(gpu()), 0.5, 1.0), addmm(input, a, b, 0.5, 1.0));
  test::check_matches_cpu(matmul(a.to(gpu()), b.to(gpu())), zeros({4, 3}), 0.0);
}

TEST_CASE("the GEMM kernel writes an output that is not row-major through a temporary") {
  for (DType dtype : kFloatingDtypes) {
    CAPTURE(dtype);
    const Tensor a = random({7, 13}, dtype), b = random({13, 5}, dtype), previous = random({5, 7}, dtype);
    const Tensor cpu_out = previous.clone().t(), gpu_out = previous.to(gpu()).t();  // [7, 5], column-major
    kernels::gemm(cpu_out, a, b, 1.5, 0.5);
    kernels::gemm(gpu_out, a.to(gpu()), b.to(gpu()), 1.5, 0.5);
    test::check_matches_cpu(gpu_out, cpu_out);
  }
}

TEST_CASE("matmul gradients on the GPU match the CPU") {
  for (DType dtype : kFloatingDtypes) {
    CAPTURE(dtype);
    test::check_forward_backward_match_cpu([](const TensorList& t) { return matmul(t[0], t[1]); },
                                           {random({2, 7, 13}, dtype), random({13, 5}, dtype)});
    test::check_forward_backward_match_cpu([](const TensorList& t) { return addmm(t[0], t[1], t[2].t(), 0.5, 2.0); },
                                           {random({5}, dtype), random({7, 13}, dtype), random({5, 13}, dtype)});
  }
}

TEST_CASE("an integer matmul on the GPU is an error that names the dtype") {
  const Tensor a = ones({2, 3}, {DType::i64, gpu()}), b = ones({3, 2}, {DType::i64, gpu()});
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("i64"), Error);
}

TEST_CASE("allowing TF32 keeps f32 products within TF32's precision") {
  REQUIRE_FALSE(cuda::allow_tf32());  // PyTorch's default for matmul
  const Tensor a = random({64, 256}, DType::f32), b = random({256, 48}, DType::f32);
  const Tensor expected = matmul(a, b);
  cuda::set_allow_tf32(true);
  const Tensor tf32 = matmul(a.to(gpu()), b.to(gpu()));
  cuda::set_allow_tf32(false);
  CHECK_FALSE(cuda::allow_tf32());
  // TF32 keeps 10 mantissa bits (relative rounding up to 2^-11 per input, about 4e-4 RMS per
  // product of two N(0, 1) values): the 256 products' errors add up to about 6e-3 RMS whatever
  // the sum's size, so an element near zero needs an absolute margin of several times that.
  test::check_matches_cpu(tf32, expected, 5e-2);
}
