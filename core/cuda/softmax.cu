// CUDA softmax and log-softmax, forward and backward, along any dim (core/kernels/softmax.h).
// A contiguous tensor along `dim` is `outer` matrices of [length, inner] (Note [Softmax rows as
// interleaved columns] in core/cpu/softmax.cpp); each column is one row to normalise, its
// element i at first + i * inner. Rows of the last dim (inner = 1) are contiguous and get one
// block each; otherwise one thread takes a row, and neighbouring threads read neighbouring
// columns, so every step along dim is one coalesced read. Math runs in opmath_t, as on the CPU.
#include <cmath>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/softmax_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"

namespace sg::cuda {

namespace {

struct SoftmaxRows {
  int64_t rows = 0, length = 1, inner = 1;
  __device__ int64_t first(int64_t row) const { return (row / inner) * length * inner + row % inner; }
};

SoftmaxRows softmax_rows(const Tensor& t, int64_t dim) {
  SoftmaxRows layout;
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) layout.inner *= t.size(d);
  layout.length = t.dim() == 0 ? 1 : t.size(dim);
  layout.rows = outer * layout.inner;
  return layout;
}

template <typename scalar_t>
struct SoftmaxForward {
  using math_t = opmath_t<scalar_t>;
  SoftmaxRows layout;
  SoftmaxKind kind;
  const scalar_t* x;
  scalar_t* y;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const int64_t first = layout.first(r), inner = layout.inner;
    auto at = [&](int64_t i) { return static_cast<math_t>(x[first + i * inner]); };
    // A row of -inf has max -inf, and -inf - -inf is NaN: such a row gives NaN, as in PyTorch.
    // A NaN element may be dropped by Max, but its exp makes the sum, so every output, NaN.
    const math_t max = threads.fold(layout.length, static_cast<math_t>(-INFINITY), at, Max{});
    const math_t sum = threads.fold(
        layout.length, math_t(0), [&](int64_t i) { return std::exp(at(i) - max); }, Plus{});
    if (kind == SoftmaxKind::softmax) {
      const math_t inverse = math_t(1) / sum;
      for (int64_t i = threads.first(); i < layout.length; i += threads.step())
        y[first + i * inner] = static_cast<scalar_t>(std::exp(at(i) - max) * inverse);
    } else {
      const math_t log_sum = std::log(sum);
      // (x - max) - log(sum), in that order: with a huge max, x - (max + log(sum)) would lose log(sum).
      for (int64_t i = threads.first(); i < layout.length; i += threads.step())
        y[first + i * inner] = static_cast<scalar_t>(at(i) - max - log_sum);
    }
  }
};

template <typename scalar_t>
struct SoftmaxBackward {
  using math_t = opmath_t<scalar_t>;
  SoftmaxRows layout;
  SoftmaxKind kind;
  const scalar_t* g;
  const scalar_t* y;
  scalar_t* grad_in;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const int64_t first = layout.first(r), inner = layout.inner;
    const bool is_softmax = kind == SoftmaxKind::softmax;
    auto g_at = [&](int64_t i) { return static_cast<math_t>(g[first + i * inner]); };
    auto y_at = [&](int64_t i) { return static_cast<math_t>(y[first + i * inner]); };
    // sum(g * y) for softmax, sum(g) for log_softmax
    const math_t total = threads.fold(
        layout.length, math_t(0), [&](int64_t i) { return is_softmax ? g_at(i) * y_at(i) : g_at(i); }, Plus{});
    for (int64_t i = threads.first(); i < layout.length; i += threads.step()) {
      const math_t gi = g_at(i), yi = y_at(i);
      grad_in[first + i * inner] = static_cast<scalar_t>(is_softmax ? yi * (gi - total) : gi - std::exp(yi) * total);
    }
  }
};

bool block_per_row(const SoftmaxRows& layout) { return layout.inner == 1 && layout.length >= kWarpSize; }

template <typename scalar_t>
void softmax_typed(SoftmaxKind kind, const Tensor& out, const Tensor& x, int64_t dim) {
  const SoftmaxRows layout = softmax_rows(out, dim);
  launch_rows(layout.rows, layout.length, block_per_row(layout),
              SoftmaxForward<scalar_t>{layout, kind, static_cast<const scalar_t*>(x.raw_data()),
                                       static_cast<scalar_t*>(out.raw_data())});
}

template <typename scalar_t>
void softmax_backward_typed(SoftmaxKind kind, const Tensor& grad_in, const Tensor& g, const Tensor& y, int64_t dim) {
  const SoftmaxRows layout = softmax_rows(grad_in, dim);
  launch_rows(layout.rows, layout.length, block_per_row(layout),
              SoftmaxBackward<scalar_t>{layout, kind, static_cast<const scalar_t*>(g.raw_data()),
                                        static_cast<const scalar_t*>(y.raw_data()),
                                        static_cast<scalar_t*>(grad_in.raw_data())});
}

}  // namespace

void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim) {
  const DeviceGuard guard(in.device().index);
  const Tensor x = kernels::contiguous(in);  // a device copy when `in` is strided (kernels::copy)
  SG_DISPATCH_FLOATING(in.dtype(), softmax_name(kind),
                       [&]<typename scalar_t>() { softmax_typed<scalar_t>(kind, out, x, dim); });
}

void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim) {
  const DeviceGuard guard(out.device().index);
  const Tensor g = kernels::contiguous(grad_out), y = kernels::contiguous(out);
  SG_DISPATCH_FLOATING(out.dtype(), softmax_name(kind),
                       [&]<typename scalar_t>() { softmax_backward_typed<scalar_t>(kind, grad_in, g, y, dim); });
}

}  // namespace sg::cuda
