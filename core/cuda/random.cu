// The CUDA loop of the random fills: thread k computes Philox block (first + k) once and writes
// elements 2k and 2k + 1 with math::draw (core/philox.h), the values the CPU loop writes (Note
// [Random numbers are the same on every device]). A strided view is written in place.
#include "core/cuda/elementwise.cuh"
#include "core/cuda/launch.cuh"
#include "core/kernels/random.h"

namespace sg::cuda {

namespace {

template <typename scalar_t>
__global__ void random_fill_kernel(ElementwiseOperands<1> out, uint64_t seed, uint64_t first, RandomDraw draw) {
  const int64_t n = out.layout.numel, pairs = (n + 1) / 2;
  for (int64_t k = grid_first(); k < pairs; k += grid_step()) {
    const PhiloxBlock block = philox4x32_10(seed, first + static_cast<uint64_t>(k));
    for (int half = 0; half < 2 && 2 * k + half < n; ++half) {
      int64_t offset[1];
      out.layout.get(2 * k + half, offset);
      // double -> opmath_t -> element: the CPU loop's two conversions.
      *reinterpret_cast<scalar_t*>(out.data[0] + offset[0]) =
          static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(math::draw(draw, half, block)));
    }
  }
}

template <typename scalar_t>
void random_fill_typed(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name) {
  random_fill_kernel<scalar_t><<<grid_for((t.numel() + 1) / 2), kBlockThreads, 0, compute_stream()>>>(
      describe_operands<1>(t.sizes(), {&t}, op_name), seed, first, draw);
  SG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name) {
  if (t.numel() == 0) return;
  const DeviceGuard guard(t.device().index);
  SG_DISPATCH_ALL(t.dtype(), op_name,
                  [&]<typename scalar_t>() { random_fill_typed<scalar_t>(t, seed, first, draw, op_name); });
}

}  // namespace sg::cuda
