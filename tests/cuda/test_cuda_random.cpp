// Random fills on the GPU draw the CPU's numbers: Philox is counter-based, element i uses block
// first + i / 2 of the same (seed, offset), and the bit-to-value transforms are one SG_HOST_DEVICE
// definition (core/philox.h). uniform_, randint_ and bernoulli_ (so dropout masks) are therefore
// bit-identical; normal_ calls log/cos/sin, which CUDA rounds within an ulp or two of glibc's
// (Note [Random numbers are the same on every device]), so it is compared to a few ulps.
#include "core/kernels/random.h"
#include "cuda_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

const Shape kShape{33, 17};  // odd element count: the last Philox block is used for one element only

// Runs `fill` into a CPU and a GPU tensor of `dtype` from two generators in the same state (a
// seed, then an offset already advanced by an earlier draw), and checks the generators end equal.
template <typename Fill>
std::pair<Tensor, Tensor> fill_both(DType dtype, bool strided, Fill fill) {
  Generator cpu_generator(1234), gpu_generator(1234);
  cpu_generator.reserve(5);
  gpu_generator.reserve(5);
  Tensor cpu = empty(kShape, {dtype});
  Tensor on_gpu = empty(kShape, {dtype, gpu()});
  if (strided) {  // a transposed view: element i (row-major) still draws from block first + i / 2
    cpu = empty({kShape[1], kShape[0]}, {dtype}).t();
    on_gpu = empty({kShape[1], kShape[0]}, {dtype, gpu()}).t();
  }
  fill(cpu, cpu_generator);
  fill(on_gpu, gpu_generator);
  CHECK(cpu_generator.offset() == gpu_generator.offset());
  return {on_gpu, cpu};
}

}  // namespace

TEST_CASE("uniform_ on the GPU is bit-identical to the CPU for every dtype, contiguous or strided") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool strided : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(strided);
      const auto [on_gpu, cpu] =
          fill_both(dtype, strided, [](const Tensor& t, Generator& g) { kernels::uniform_(t, -2.5, 3.0, g); });
      CHECK(test::values(on_gpu.to(Device::cpu())) == test::values(cpu));
    }
  }
}

TEST_CASE("randint_ on the GPU is bit-identical to the CPU, including ranges past 2^32") {
  for (DType dtype : {DType::i64, DType::i32, DType::f32}) {
    for (int64_t high : {int64_t(7), int64_t(1) << 40}) {
      if (dtype != DType::i64 && high > 7) continue;  // only i64 holds the wide range exactly
      CAPTURE(dtype);
      CAPTURE(high);
      const auto [on_gpu, cpu] =
          fill_both(dtype, false, [high](const Tensor& t, Generator& g) { kernels::randint_(t, -3, high, g); });
      CHECK(test::values(on_gpu.to(Device::cpu())) == test::values(cpu));
    }
  }
}

TEST_CASE("bernoulli_ on the GPU is bit-identical to the CPU, so dropout masks match") {
  for (DType dtype : {DType::f32, DType::f16, DType::boolean, DType::u8}) {
    for (bool strided : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(strided);
      const auto [on_gpu, cpu] =
          fill_both(dtype, strided, [](const Tensor& t, Generator& g) { kernels::bernoulli_(t, 0.3, g); });
      CHECK(test::values(on_gpu.to(Device::cpu())) == test::values(cpu));
    }
  }
}

TEST_CASE("normal_ on the GPU matches the CPU to a few ulps (the math libraries round log/cos/sin differently)") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool strided : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(strided);
      const auto [on_gpu, cpu] =
          fill_both(dtype, strided, [](const Tensor& t, Generator& g) { kernels::normal_(t, 0.5, 2.0, g); });
      // f64: CUDA's log/cos/sin are within 2 ulps; narrower dtypes round that away but for values at
      // a rounding boundary, which may land one unit of the dtype's last place apart.
      const double tolerance = dtype == DType::f64 ? 1e-14 : test::tolerance_for(dtype);
      test::check_matches_cpu(on_gpu, cpu, tolerance);
    }
  }
}

TEST_CASE("consecutive GPU fills continue the generator's stream as the CPU's do") {
  Generator cpu_generator(99), gpu_generator(99);
  for (int fill = 0; fill < 3; ++fill) {
    CAPTURE(fill);
    const Tensor cpu = empty({fill * 5 + 3}, {DType::f32});
    const Tensor on_gpu = empty({fill * 5 + 3}, {DType::f32, gpu()});
    kernels::uniform_(cpu, 0.0, 1.0, cpu_generator);
    kernels::uniform_(on_gpu, 0.0, 1.0, gpu_generator);
    CHECK(test::values(on_gpu.to(Device::cpu())) == test::values(cpu));
  }
}
