// CPU softmax and log-softmax, forward and backward: each reads a row a few times (max, sum,
// write) and allocates nothing the size of the tensor.
//
// Note [Softmax rows as interleaved columns]
// A contiguous tensor softmaxed along `dim` is a stack of [length, inner] matrices (length =
// the size of dim, inner = the product of the later dims), one per position of the earlier
// dims, and each of their columns is one row to normalise. Rows of the last dim (inner = 1)
// are contiguous. For other dims we walk kColumns neighbouring columns in lockstep, so every
// step along dim reads kColumns consecutive elements instead of one element per cache line.
// The same code serves both cases: a group of width 1 with step 1 is a contiguous row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cpu/softmax_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

constexpr int64_t kColumns = 16;  // one 64-byte cache line of f32

// kWidth rows interleaved in memory: row c's element i is at offset + c + i * step. kWidth is a
// template parameter of the kernels, so their per-row accumulators stay in registers (with a
// run-time width they live on the stack, which measured twice as slow).
struct Rows {
  int64_t offset;
  int64_t length;
  int64_t step;
};

// Calls f.template operator()<kWidth>(rows) for every row along `dim` of a contiguous tensor:
// groups of kColumns neighbouring rows, then any leftover rows one at a time (kWidth = 1; the
// only case for the last dim). Groups run in parallel; each row is computed by one call, so
// the result does not depend on the thread count.
template <typename F>
void for_each_row_group(const Tensor& t, int64_t dim, F f) {
  const Shape& sizes = t.sizes();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= sizes[d];
  const int64_t length = t.dim() == 0 ? 1 : sizes[dim];
  const int64_t groups_per_matrix = (inner + kColumns - 1) / kColumns;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, length * std::min(inner, kColumns)));
  parallel_for(outer * groups_per_matrix, grain, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t matrix = g / groups_per_matrix, first_column = (g % groups_per_matrix) * kColumns;
      const int64_t offset = matrix * length * inner + first_column;
      if (inner - first_column >= kColumns) {
        f.template operator()<kColumns>(Rows{offset, length, inner});
      } else {
        for (int64_t c = 0; c < inner - first_column; ++c) f.template operator()<1>(Rows{offset + c, length, inner});
      }
    }
  });
}

template <int64_t kWidth, typename scalar_t>
void softmax_rows(SoftmaxKind kind, const scalar_t* x, scalar_t* y, const Rows& rows) {
  using math_t = opmath_t<scalar_t>;
  const auto at = [&](int64_t i, int64_t c) { return rows.offset + c + i * rows.step; };
  math_t max[kWidth], sum[kWidth];
  std::fill_n(max, kWidth, -std::numeric_limits<math_t>::infinity());
  std::fill_n(sum, kWidth, math_t(0));
  for (int64_t i = 0; i < rows.length; ++i)
    for (int64_t c = 0; c < kWidth; ++c) max[c] = std::max(max[c], static_cast<math_t>(x[at(i, c)]));
  // When the output type is the compute type, exp(x - max) is kept in y and scaled afterwards;
  // a 16-bit y would round it twice, so then it is recomputed instead.
  constexpr bool keep_exp = std::is_same_v<scalar_t, math_t>;
  for (int64_t i = 0; i < rows.length; ++i)
    for (int64_t c = 0; c < kWidth; ++c) {
      const math_t e = std::exp(static_cast<math_t>(x[at(i, c)]) - max[c]);
      sum[c] += e;
      if constexpr (keep_exp)
        if (kind == SoftmaxKind::softmax) y[at(i, c)] = e;
    }
  if (kind == SoftmaxKind::softmax) {
    for (int64_t c = 0; c < kWidth; ++c) sum[c] = math_t(1) / sum[c];
    for (int64_t i = 0; i < rows.length; ++i)
      for (int64_t c = 0; c < kWidth; ++c) {
        const math_t e =
            keep_exp ? static_cast<math_t>(y[at(i, c)]) : std::exp(static_cast<math_t>(x[at(i, c)]) - max[c]);
        y[at(i, c)] = static_cast<scalar_t>(e * sum[c]);
      }
  } else {
    for (int64_t c = 0; c < kWidth; ++c) sum[c] = std::log(sum[c]);
    // (x - max) - log(sum), in that order: with a huge max, x - (max + log(sum)) would lose log(sum).
    for (int64_t i = 0; i < rows.length; ++i)
      for (int64_t c = 0; c < kWidth; ++c)
        y[at(i, c)] = static_cast<scalar_t>(static_cast<math_t>(x[at(i, c)]) - max[c] - sum[c]);
  }
}

template <int64_t kWidth, typename scalar_t>
void softmax_backward_rows(SoftmaxKind kind, const scalar_t* g, const scalar_t* y, scalar_t* grad_in,
                           const Rows& rows) {
  using math_t = opmath_t<scalar_t>;
  const auto at = [&](int64_t i, int64_t c) { return rows.offset + c + i * rows.step; };
  const bool is_softmax = kind == SoftmaxKind::softmax;
  math_t total[kWidth];  // sum(g * y) for softmax, sum(g) for log_softmax
  std::fill_n(total, kWidth, math_t(0));
  for (int64_t i = 0; i < rows.length; ++i)
    for (int64_t c = 0; c < kWidth; ++c) {
      const math_t gi = static_cast<math_t>(g[at(i, c)]);
      total[c] += is_softmax ? gi * static_cast<math_t>(y[at(i, c)]) : gi;
    }
  for (int64_t i = 0; i < rows.length; ++i)
    for (int64_t c = 0; c < kWidth; ++c) {
      const math_t gi = static_cast<math_t>(g[at(i, c)]), yi = static_cast<math_t>(y[at(i, c)]);
      grad_in[at(i, c)] = static_cast<scalar_t>(is_softmax ? yi * (gi - total[c]) : gi - std::exp(yi) * total[c]);
    }
}

}  // namespace

void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim) {
  const Tensor x = kernels::contiguous(in);
  SG_DISPATCH_FLOATING(in.dtype(), softmax_name(kind), [&]<typename scalar_t>() {
    const scalar_t* x_data = static_cast<const scalar_t*>(x.raw_data());
    scalar_t* y_data = static_cast<scalar_t*>(out.raw_data());
    for_each_row_group(out, dim,
                       [&]<int64_t kWidth>(const Rows& rows) { softmax_rows<kWidth>(kind, x_data, y_data, rows); });
  });
}

void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim) {
  const Tensor g = kernels::contiguous(grad_out), y = kernels::contiguous(out);
  SG_DISPATCH_FLOATING(out.dtype(), softmax_name(kind), [&]<typename scalar_t>() {
    const scalar_t* g_data = static_cast<const scalar_t*>(g.raw_data());
    const scalar_t* y_data = static_cast<const scalar_t*>(y.raw_data());
    scalar_t* grad_data = static_cast<scalar_t*>(grad_in.raw_data());
    for_each_row_group(grad_in, dim, [&]<int64_t kWidth>(const Rows& rows) {
      softmax_backward_rows<kWidth>(kind, g_data, y_data, grad_data, rows);
    });
  });
}

}  // namespace sg::cpu
