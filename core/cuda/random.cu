// The CUDA loop of the random fills: thread k computes Philox block (first + k) once and writes
// elements 2k and 2k + 1 with math::draw (core/philox.h), the values the CPU loop writes (Note
// [Random numbers are the same on every device]). A strided view is written in place.
// multinomial: one thread per row sums the row's weights in index order, in double, as the CPU
// does (simple; a long single row is one thread's walk), then one thread per sample draws with
// math::draw_category: the CPU's samples, bit for bit.
#include "core/cuda/elementwise.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/random_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

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

template <typename scalar_t>
__global__ void running_sums_kernel(const scalar_t* weights, int64_t rows, int64_t categories, double* cdf) {
  for (int64_t r = grid_first(); r < rows; r += grid_step()) {
    double running = 0;
    for (int64_t i = r * categories; i < (r + 1) * categories; ++i) {
      running += static_cast<double>(static_cast<opmath_t<scalar_t>>(weights[i]));
      cdf[i] = running;
    }
  }
}

template <typename scalar_t>
void launch_running_sums(const Tensor& weights, int64_t rows, int64_t categories, const Tensor& cdf) {
  running_sums_kernel<scalar_t><<<grid_for(rows), kBlockThreads, 0, compute_stream()>>>(
      static_cast<const scalar_t*>(weights.raw_data()), rows, categories, cdf.data_ptr<double>());
  SG_CUDA_CHECK_LAUNCH();
}

__global__ void draw_categories_kernel(const double* cdf, int64_t n, int64_t samples, int64_t categories, uint64_t seed,
                                       uint64_t first, int64_t* out) {
  for (int64_t e = grid_first(); e < n; e += grid_step()) {
    const PhiloxBlock block = philox4x32_10(seed, first + static_cast<uint64_t>(e / 2));
    out[e] = math::draw_category(int(e % 2), block, cdf + (e / samples) * categories, categories);
  }
}

}  // namespace

void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name) {
  if (t.numel() == 0) return;
  const DeviceGuard guard(t.device().index);
  SG_DISPATCH_ALL(t.dtype(), op_name,
                  [&]<typename scalar_t>() { random_fill_typed<scalar_t>(t, seed, first, draw, op_name); });
}

void multinomial_with_replacement(const Tensor& out, const Tensor& probs, uint64_t seed, uint64_t first) {
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device().index);
  const Tensor weights = kernels::contiguous(probs);
  const int64_t rows = out.size(0), samples = out.size(1), categories = probs.size(1);
  const Tensor cdf = empty({rows, categories}, {DType::f64, out.device()});
  SG_DISPATCH_FLOATING(probs.dtype(), "multinomial",
                       [&]<typename scalar_t>() { launch_running_sums<scalar_t>(weights, rows, categories, cdf); });
  draw_categories_kernel<<<grid_for(out.numel()), kBlockThreads, 0, compute_stream()>>>(
      cdf.data_ptr<double>(), out.numel(), samples, categories, seed, first, out.data_ptr<int64_t>());
  SG_CUDA_CHECK_LAUNCH();
}

}  // namespace sg::cuda
