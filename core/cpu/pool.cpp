// CPU pooling: each plane (n, c) of [N, C, H, W] is pooled on its own, planes in parallel.
// Output (p, q) of a plane is one window of the input; the backward kernels send each output's
// gradient back through the same window, walking one plane's outputs in order, so the sums are
// deterministic. Average pooling and adaptive average pooling differ only in which rectangle each
// output averages and what it divides by (core/pool_math.h), so they share their forward and backward loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/pool_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/parallel.h"
#include "core/pool_math.h"

namespace sg::cpu {

namespace {

// Calls plane_fn(plane) for every plane, in parallel; `work_per_plane` (elements touched) sizes the chunks.
template <typename PlaneFn>
void for_each_plane(int64_t planes, int64_t work_per_plane, const PlaneFn& plane_fn) {
  parallel_for(planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_plane)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t plane = begin; plane < end; ++plane) plane_fn(plane);
               });
}

using math::PoolPlane;
using math::PoolRect;
using math::TapRange;
using math::taps_inside;

PoolPlane plane_of(const Tensor& input, const Tensor& out) {
  const int64_t P = out.size(-2), Q = out.size(-1);
  return PoolPlane{P * Q == 0 ? 0 : out.numel() / (P * Q), input.size(-2), input.size(-1), P, Q};
}

// The smallest q >= 0 with q * step >= x.
int64_t first_index_at_least(int64_t x, int64_t step) { return x <= 0 ? 0 : (x + step - 1) / step; }

// Note [Max pooling a row at a time]
// Output row p is computed tap by tap: for every tap (h, j) of its windows, one pass over the outputs q
// whose window has that tap inside the input keeps the larger of the tap and the best so far. The taps
// are visited in row-major window order, as a per-window loop would, so ties and NaN resolve the same
// (first maximum, last NaN); but the pass over q has no branch to mispredict and vectorises, where a
// loop over a 2 x 2 window per output costs a mispredicted comparison per output.
// One tap of Note [Max pooling a row at a time]: output q sees tap value row[q * stride_w], at index
// row_index + q * stride_w of the plane. Plain value parameters, so that the compiler need not reload
// them after each index store, and `|` rather than `||`, so that the loop has no branch.
template <typename T>
void max_pool_tap(T* best, int64_t* best_index, const T* row, int64_t row_index, int64_t q_begin, int64_t q_end,
                  int64_t stride_w) {
  using M = opmath_t<T>;
  for (int64_t q = q_begin; q < q_end; ++q) {
    const M value = static_cast<M>(row[q * stride_w]);
    const bool take = (value > static_cast<M>(best[q])) | (value != value);  // value != value: NaN
    best[q] = take ? static_cast<T>(value) : best[q];
    best_index[q] = take ? row_index + q * stride_w : best_index[q];
  }
}

template <typename T>
void max_pool2d_typed(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window) {
  using M = opmath_t<T>;
  const PoolPlane plane = plane_of(input, out);
  const T* in_data = static_cast<const T*>(input.raw_data());
  T* out_data = static_cast<T*>(out.raw_data());
  int64_t* index_data = static_cast<int64_t*>(indices.raw_data());
  const Size2 k = window.kernel_size, stride = window.stride, pad = window.padding, dil = window.dilation;
  const int64_t W = plane.W, Q = plane.Q;
  // What depends on the column only, the same for every row and plane: the first column tap inside the
  // input of window q (its index when every tap is -inf or padding, as PyTorch does), and for tap column
  // j, its offset (output q reads input column q stride.w + offset) and the outputs q it is inside for.
  std::vector<int64_t> first_column(Q), offsets(k.w), q_begins(k.w), q_ends(k.w);
  for (int64_t q = 0; q < Q; ++q) first_column[q] = taps_inside(q, W, k.w, stride.w, pad.w, dil.w).begin;
  for (int64_t j = 0; j < k.w; ++j) {
    offsets[j] = j * dil.w - pad.w;
    q_begins[j] = std::min(Q, first_index_at_least(-offsets[j], stride.w));
    q_ends[j] = std::clamp(first_index_at_least(W - offsets[j], stride.w), q_begins[j], Q);
  }
  for_each_plane(plane.count, plane.P * Q * k.h * k.w, [&](int64_t n) {
    const T* in = in_data + n * plane.H * W;
    for (int64_t p = 0; p < plane.P; ++p) {
      T* best = out_data + (n * plane.P + p) * Q;
      int64_t* best_index = index_data + (n * plane.P + p) * Q;
      const TapRange rows = taps_inside(p, plane.H, k.h, stride.h, pad.h, dil.h);
      for (int64_t q = 0; q < Q; ++q) {
        best[q] = static_cast<T>(-std::numeric_limits<M>::infinity());
        best_index[q] = rows.begin * W + first_column[q];
      }
      for (int64_t h = rows.begin; h < rows.end; h += dil.h)
        for (int64_t j = 0; j < k.w; ++j)
          max_pool_tap(best, best_index, in + h * W + offsets[j], h * W + offsets[j], q_begins[j], q_ends[j], stride.w);
    }
  });
}

template <typename T>
void max_pool2d_backward_typed(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  using M = opmath_t<T>;
  const PoolPlane plane = plane_of(grad_input, grad_out);
  T* grad_in_data = static_cast<T*>(grad_input.raw_data());
  const T* grad_out_data = static_cast<const T*>(grad_out.raw_data());
  const int64_t* index_data = static_cast<const int64_t*>(indices.raw_data());
  for_each_plane(plane.count, plane.H * plane.W + plane.P * plane.Q, [&](int64_t n) {
    T* grad_in = grad_in_data + n * plane.H * plane.W;
    const T* grad = grad_out_data + n * plane.P * plane.Q;
    const int64_t* index = index_data + n * plane.P * plane.Q;
    std::fill(grad_in, grad_in + plane.H * plane.W, T(0));
    for (int64_t o = 0; o < plane.P * plane.Q; ++o)
      grad_in[index[o]] = static_cast<T>(static_cast<M>(grad_in[index[o]]) + static_cast<M>(grad[o]));
  });
}

// out[p, q] = sum of the input over rect_of(p, q, plane) / its divisor, every plane.
template <typename RectOf>
void average_forward(const Tensor& out, const Tensor& input_any, const RectOf& rect_of) {
  const Tensor input = kernels::contiguous(input_any);
  const PoolPlane plane = plane_of(input, out);
  SG_DISPATCH_FLOATING(out.dtype(), "avg_pool2d", [&]<typename T>() {
    using M = opmath_t<T>;
    const T* in_data = static_cast<const T*>(input.raw_data());
    T* out_data = static_cast<T*>(out.raw_data());
    for_each_plane(plane.count, plane.H * plane.W + plane.P * plane.Q, [&](int64_t n) {
      const T* in = in_data + n * plane.H * plane.W;
      T* out_plane = out_data + n * plane.P * plane.Q;
      for (int64_t p = 0; p < plane.P; ++p) {
        for (int64_t q = 0; q < plane.Q; ++q) {
          const PoolRect rect = rect_of(p, q, plane);
          M sum = 0;
          for (int64_t h = rect.h_begin; h < rect.h_end; ++h)
            for (int64_t w = rect.w_begin; w < rect.w_end; ++w) sum += static_cast<M>(in[h * plane.W + w]);
          out_plane[p * plane.Q + q] = static_cast<T>(rect.empty() ? M(0) : sum / static_cast<M>(rect.divisor));
        }
      }
    });
  });
}

// d out[p, q] / d in[h, w] = 1 / divisor for (h, w) in rect_of(p, q): each output's gradient is spread
// evenly over its rectangle; overlapping rectangles add.
template <typename RectOf>
void average_backward(const Tensor& grad_input, const Tensor& grad_out_any, const RectOf& rect_of) {
  const Tensor grad_out = kernels::contiguous(grad_out_any);
  const PoolPlane plane = plane_of(grad_input, grad_out);
  SG_DISPATCH_FLOATING(grad_input.dtype(), "avg_pool2d_backward", [&]<typename T>() {
    using M = opmath_t<T>;
    T* grad_in_data = static_cast<T*>(grad_input.raw_data());
    const T* grad_out_data = static_cast<const T*>(grad_out.raw_data());
    for_each_plane(plane.count, plane.H * plane.W + plane.P * plane.Q, [&](int64_t n) {
      T* grad_in = grad_in_data + n * plane.H * plane.W;
      const T* grad = grad_out_data + n * plane.P * plane.Q;
      std::fill(grad_in, grad_in + plane.H * plane.W, T(0));
      for (int64_t p = 0; p < plane.P; ++p) {
        for (int64_t q = 0; q < plane.Q; ++q) {
          const PoolRect rect = rect_of(p, q, plane);
          if (rect.empty()) continue;
          const M share = static_cast<M>(grad[p * plane.Q + q]) / static_cast<M>(rect.divisor);
          for (int64_t h = rect.h_begin; h < rect.h_end; ++h)
            for (int64_t w = rect.w_begin; w < rect.w_end; ++w)
              grad_in[h * plane.W + w] = static_cast<T>(static_cast<M>(grad_in[h * plane.W + w]) + share);
        }
      }
    });
  });
}

}  // namespace

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window) {
  const Tensor input_data = kernels::contiguous(input);
  SG_DISPATCH_FLOATING(out.dtype(), "max_pool2d",
                       [&]<typename T>() { max_pool2d_typed<T>(out, indices, input_data, window); });
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  const Tensor grad_out_data = kernels::contiguous(grad_out), index_data = kernels::contiguous(indices);
  SG_DISPATCH_FLOATING(grad_input.dtype(), "max_pool2d_backward",
                       [&]<typename T>() { max_pool2d_backward_typed<T>(grad_input, grad_out_data, index_data); });
}

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dWindow& window, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  average_forward(out, input, math::AvgPoolRect::make(window, count_include_pad, divisor_override));
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dWindow& window,
                         bool count_include_pad, std::optional<int64_t> divisor_override) {
  average_backward(grad_input, grad_out, math::AvgPoolRect::make(window, count_include_pad, divisor_override));
}

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input) { average_forward(out, input, math::AdaptiveRect{}); }

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  average_backward(grad_input, grad_out, math::AdaptiveRect{});
}

}  // namespace sg::cpu
