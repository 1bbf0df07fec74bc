// CUDA layer norm, forward and backward (core/kernels/norm.h), with the CPU kernel's arithmetic:
// row statistics as two-pass sums in double, the normalisation itself in opmath_t.
//
// Shape letters: M rows of K elements. Every row is reduced by one block (one thread when K is
// short; Note [Deterministic GPU row reductions]). The weight and bias gradients sum over rows
// instead, in two steps that fix the order of every addition: each chunk of rows sums its
// columns (one thread per column, rows in order), then one thread per column adds the chunks
// in order — no atomics, the same bits on every run.
#include <algorithm>
#include <cmath>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/norm_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"

namespace sg::cuda {

namespace {

template <typename scalar_t>
__device__ double widen(scalar_t value) {
  return static_cast<double>(static_cast<opmath_t<scalar_t>>(value));
}

template <typename scalar_t>
struct LayerNormForward {
  using math_t = opmath_t<scalar_t>;
  const scalar_t* x;
  const scalar_t* weight;  // may be null (1)
  const scalar_t* bias;    // may be null (0)
  scalar_t* y;
  math_t* mean;
  math_t* rstd;
  int64_t K;
  double eps;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const scalar_t* in = x + r * K;
    const double m = threads.fold(
                         K, 0.0, [&](int64_t k) { return widen(in[k]); }, Plus{}) /
                     static_cast<double>(K);
    const double var = threads.fold(
                           K, 0.0,
                           [&](int64_t k) {
                             const double d = widen(in[k]) - m;
                             return d * d;
                           },
                           Plus{}) /
                       static_cast<double>(K);
    const double inv = 1.0 / std::sqrt(var + eps);
    if (threads.leader()) {
      mean[r] = static_cast<math_t>(m);
      rstd[r] = static_cast<math_t>(inv);
    }
    const auto m_m = static_cast<math_t>(m);
    const auto inv_m = static_cast<math_t>(inv);
    for (int64_t k = threads.first(); k < K; k += threads.step()) {
      math_t value = (static_cast<math_t>(in[k]) - m_m) * inv_m;
      if (weight != nullptr) value *= static_cast<math_t>(weight[k]);
      if (bias != nullptr) value += static_cast<math_t>(bias[k]);
      y[r * K + k] = static_cast<scalar_t>(value);
    }
  }
};

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) per row, dxhat = dy * w.
template <typename scalar_t>
struct LayerNormBackwardInput {
  using math_t = opmath_t<scalar_t>;
  const scalar_t* x;
  const scalar_t* dy;
  const scalar_t* weight;  // may be null (1)
  const math_t* mean;
  const math_t* rstd;
  scalar_t* dx;
  int64_t K;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const scalar_t* in = x + r * K;
    const scalar_t* g = dy + r * K;
    const double m = mean[r];
    const double inv = rstd[r];
    auto dxhat = [&](int64_t k) { return widen(g[k]) * (weight != nullptr ? widen(weight[k]) : 1.0); };
    const double mean_dxhat = threads.fold(K, 0.0, dxhat, Plus{}) / static_cast<double>(K);
    const double mean_dxhat_xhat = threads.fold(
                                       K, 0.0, [&](int64_t k) { return dxhat(k) * (widen(in[k]) - m) * inv; }, Plus{}) /
                                   static_cast<double>(K);
    for (int64_t k = threads.first(); k < K; k += threads.step()) {
      const double xhat = (widen(in[k]) - m) * inv;
      dx[r * K + k] = static_cast<scalar_t>(inv * (dxhat(k) - mean_dxhat - xhat * mean_dxhat_xhat));
    }
  }
};

constexpr int64_t kRowsPerChunk = 128;
constexpr int64_t kMaxChunks = 65535;  // gridDim.y limit
constexpr int kColumnThreads = 256;

// Step 1: for chunk blockIdx.y of `rows_per_chunk` rows and column k, the sums of dy * xhat and
// of dy over the chunk's rows in order, into partial[0][chunk][k] and partial[1][chunk][k].
template <typename scalar_t>
__global__ void column_partials_kernel(const scalar_t* x, const scalar_t* dy, const opmath_t<scalar_t>* mean,
                                       const opmath_t<scalar_t>* rstd, int64_t M, int64_t K, int64_t rows_per_chunk,
                                       double* partial) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= K) return;
  const int64_t chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t end = std::min(M, (chunk + 1) * rows_per_chunk);
  double sum_dy_xhat = 0, sum_dy = 0;
  for (int64_t r = chunk * rows_per_chunk; r < end; ++r) {
    const double g = widen(dy[r * K + k]);
    sum_dy_xhat += g * (widen(x[r * K + k]) - static_cast<double>(mean[r])) * static_cast<double>(rstd[r]);
    sum_dy += g;
  }
  partial[chunk * K + k] = sum_dy_xhat;
  partial[(chunks + chunk) * K + k] = sum_dy;
}

// Step 2: each column's chunk sums added in chunk order.
template <typename scalar_t>
__global__ void column_totals_kernel(const double* partial, int64_t chunks, int64_t K, scalar_t* grad_weight,
                                     scalar_t* grad_bias) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= K) return;
  double sum_dy_xhat = 0, sum_dy = 0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    sum_dy_xhat += partial[chunk * K + k];
    sum_dy += partial[(chunks + chunk) * K + k];
  }
  if (grad_weight != nullptr) grad_weight[k] = static_cast<scalar_t>(sum_dy_xhat);
  if (grad_bias != nullptr) grad_bias[k] = static_cast<scalar_t>(sum_dy);
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

bool block_per_row(int64_t K) { return K >= kWarpSize; }

template <typename scalar_t>
void weight_and_bias_gradients(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& x, const Tensor& dy,
                               const Tensor& mean, const Tensor& rstd, int64_t M, int64_t K) {
  using math_t = opmath_t<scalar_t>;
  if (K == 0) return;
  const int64_t rows_per_chunk = std::max(kRowsPerChunk, (M + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = std::max<int64_t>(1, (M + rows_per_chunk - 1) / rows_per_chunk);
  const Tensor partial = empty({2, chunks, K}, {DType::f64, x.device()});
  const auto column_blocks = static_cast<unsigned>((K + kColumnThreads - 1) / kColumnThreads);
  column_partials_kernel<scalar_t>
      <<<dim3(column_blocks, static_cast<unsigned>(chunks)), kColumnThreads, 0, compute_stream()>>>(
          data_or_null<const scalar_t>(x), data_or_null<const scalar_t>(dy), data_or_null<const math_t>(mean),
          data_or_null<const math_t>(rstd), M, K, rows_per_chunk, data_or_null<double>(partial));
  SG_CUDA_CHECK_LAUNCH();
  column_totals_kernel<scalar_t><<<column_blocks, kColumnThreads, 0, compute_stream()>>>(
      data_or_null<const double>(partial), chunks, K, data_or_null<scalar_t>(grad_weight),
      data_or_null<scalar_t>(grad_bias));
  SG_CUDA_CHECK_LAUNCH();
}

template <typename scalar_t>
void layer_norm_typed(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, int64_t K, double eps) {
  using math_t = opmath_t<scalar_t>;
  launch_rows(mean.numel(), K, block_per_row(K),
              LayerNormForward<scalar_t>{data_or_null<const scalar_t>(x), data_or_null<const scalar_t>(weight),
                                         data_or_null<const scalar_t>(bias), data_or_null<scalar_t>(out),
                                         data_or_null<math_t>(mean), data_or_null<math_t>(rstd), K, eps});
}

template <typename scalar_t>
void layer_norm_backward_typed(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                               const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, int64_t K) {
  using math_t = opmath_t<scalar_t>;
  const int64_t M = mean.numel();
  if (grad_input.defined()) {
    launch_rows(
        M, K, block_per_row(K),
        LayerNormBackwardInput<scalar_t>{data_or_null<const scalar_t>(x), data_or_null<const scalar_t>(dy),
                                         data_or_null<const scalar_t>(weight), data_or_null<const math_t>(mean),
                                         data_or_null<const math_t>(rstd), data_or_null<scalar_t>(grad_input), K});
  }
  if (grad_weight.defined() || grad_bias.defined())
    weight_and_bias_gradients<scalar_t>(grad_weight, grad_bias, x, dy, mean, rstd, M, K);
}

Tensor optional_contiguous(const Tensor& t) { return t.defined() ? kernels::contiguous(t) : Tensor(); }

}  // namespace

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, int64_t row_length, double eps) {
  const DeviceGuard guard(input.device().index);
  // Strided inputs become contiguous device copies (kernels::copy), as on the CPU.
  const Tensor x = kernels::contiguous(input), w = optional_contiguous(weight), b = optional_contiguous(bias);
  SG_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&]<typename scalar_t>() {
    layer_norm_typed<scalar_t>(out, mean, rstd, x, w, b, row_length, eps);
  });
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, int64_t row_length) {
  const DeviceGuard guard(input.device().index);
  const Tensor x = kernels::contiguous(input), dy = kernels::contiguous(grad_out), w = optional_contiguous(weight);
  SG_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward", [&]<typename scalar_t>() {
    layer_norm_backward_typed<scalar_t>(grad_input, grad_weight, grad_bias, dy, x, w, mean, rstd, row_length);
  });
}

}  // namespace sg::cuda
