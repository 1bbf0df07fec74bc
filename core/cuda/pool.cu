// CUDA pooling: one thread per output element for the forward kernels, each visiting its window's
// taps in the CPU kernel's order (core/cpu/pool.cpp), with the window geometry of
// core/pool_math.h. The backward kernels never add floats atomically: each input element has one
// thread that sums the outputs reaching it in increasing (p, q), the CPU's order (for max pooling,
// those whose maximum it is). Every result is the CPU's, bit for bit.
#include <cuda_runtime.h>

#include "core/cuda/launch.cuh"
#include "core/cuda/pool_kernels.h"
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/pool_math.h"

namespace sg::cuda {

namespace {

using math::PoolPlane;
using math::PoolRect;

PoolPlane plane_of(const Tensor& input, const Tensor& out) {
  const int64_t P = out.size(-2), Q = out.size(-1);
  return PoolPlane{P * Q == 0 ? 0 : out.numel() / (P * Q), input.size(-2), input.size(-1), P, Q};
}

// The window of max pooling, as plain numbers for the kernel.
struct MaxWindow {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};
MaxWindow max_window(const Pool2dWindow& window) {
  return {window.kernel_size.h, window.kernel_size.w, window.stride.h,   window.stride.w,
          window.padding.h,     window.padding.w,     window.dilation.h, window.dilation.w};
}

// Output (n, p, q): the first maximum of its window in row-major tap order, a NaN tap always taking
// over (so the last NaN wins); the index starts at the window's first tap inside the input, which
// it keeps when every tap is -inf, as the CPU kernel.
template <typename T>
__global__ void max_pool2d_kernel(T* out, int64_t* indices, const T* input, PoolPlane plane, MaxWindow k) {
  using M = opmath_t<T>;
  const int64_t total = plane.count * plane.P * plane.Q;
  for (int64_t o = grid_first(); o < total; o += grid_step()) {
    const int64_t q = o % plane.Q, p = (o / plane.Q) % plane.P, n = o / (plane.P * plane.Q);
    const T* in = input + n * plane.H * plane.W;
    const math::TapRange rows = math::taps_inside(p, plane.H, k.kernel_h, k.stride_h, k.pad_h, k.dilation_h);
    const math::TapRange columns = math::taps_inside(q, plane.W, k.kernel_w, k.stride_w, k.pad_w, k.dilation_w);
    M best = -INFINITY;
    int64_t best_index = rows.begin * plane.W + columns.begin;
    for (int64_t h = rows.begin; h < rows.end; h += k.dilation_h) {
      for (int64_t w = columns.begin; w < columns.end; w += k.dilation_w) {
        const M value = static_cast<M>(in[h * plane.W + w]);
        if (value > best || value != value) {  // value != value: NaN
          best = value;
          best_index = h * plane.W + w;
        }
      }
    }
    out[o] = static_cast<T>(best);
    indices[o] = best_index;
  }
}

// The outputs [begin, end) of one axis whose window (kernel taps `dilation` apart) can reach input
// position x: o * stride - padding <= x <= o * stride - padding + (kernel - 1) * dilation.
__device__ inline math::TapRange outputs_reaching(int64_t x, int64_t outputs, int64_t kernel, int64_t stride,
                                                  int64_t padding, int64_t dilation) {
  const int64_t lowest = x + padding - (kernel - 1) * dilation;
  const int64_t begin = lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
  return math::TapRange{begin, min(outputs, (x + padding) / stride + 1)};
}

// grad_input[n, h, w] = the sum of grad_out[n, p, q] over the outputs whose maximum is (h, w), in
// increasing (p, q) and rounded to T after each addition: what the CPU kernel's walk over the
// outputs adds into that element, in the same order.
template <typename T>
__global__ void max_pool2d_backward_kernel(T* grad_input, const T* grad_out, const int64_t* indices, PoolPlane plane,
                                           MaxWindow k) {
  using M = opmath_t<T>;
  const int64_t total = plane.count * plane.H * plane.W;
  for (int64_t e = grid_first(); e < total; e += grid_step()) {
    const int64_t w = e % plane.W, h = (e / plane.W) % plane.H, n = e / (plane.H * plane.W);
    const math::TapRange rows = outputs_reaching(h, plane.P, k.kernel_h, k.stride_h, k.pad_h, k.dilation_h);
    const math::TapRange columns = outputs_reaching(w, plane.Q, k.kernel_w, k.stride_w, k.pad_w, k.dilation_w);
    const T* grad = grad_out + n * plane.P * plane.Q;
    const int64_t* index = indices + n * plane.P * plane.Q;
    const int64_t here = h * plane.W + w;
    T sum = T(0);
    for (int64_t p = rows.begin; p < rows.end; ++p)
      for (int64_t q = columns.begin; q < columns.end; ++q)
        if (index[p * plane.Q + q] == here)
          sum = static_cast<T>(static_cast<M>(sum) + static_cast<M>(grad[p * plane.Q + q]));
    grad_input[e] = sum;
  }
}

// out[n, p, q] = the sum over rect_of(p, q) (row-major, as the CPU) / its divisor.
template <typename T, typename RectOf>
__global__ void average_forward_kernel(T* out, const T* input, PoolPlane plane, RectOf rect_of) {
  using M = opmath_t<T>;
  const int64_t total = plane.count * plane.P * plane.Q;
  for (int64_t o = grid_first(); o < total; o += grid_step()) {
    const int64_t q = o % plane.Q, p = (o / plane.Q) % plane.P, n = o / (plane.P * plane.Q);
    const T* in = input + n * plane.H * plane.W;
    const PoolRect rect = rect_of(p, q, plane);
    M sum = 0;
    for (int64_t h = rect.h_begin; h < rect.h_end; ++h)
      for (int64_t w = rect.w_begin; w < rect.w_end; ++w) sum += static_cast<M>(in[h * plane.W + w]);
    out[o] = static_cast<T>(rect.empty() ? M(0) : sum / static_cast<M>(rect.divisor));
  }
}

// grad_input[n, h, w] = the sum of grad_out[n, p, q] / divisor over the outputs whose rectangle holds
// (h, w), in increasing (p, q) and rounded to T after each addition: the CPU kernel's sum.
template <typename T, typename RectOf>
__global__ void average_backward_kernel(T* grad_input, const T* grad_out, PoolPlane plane, RectOf rect_of) {
  using M = opmath_t<T>;
  const int64_t total = plane.count * plane.H * plane.W;
  for (int64_t e = grid_first(); e < total; e += grid_step()) {
    const int64_t w = e % plane.W, h = (e / plane.W) % plane.H, n = e / (plane.H * plane.W);
    const T* grad = grad_out + n * plane.P * plane.Q;
    const math::TapRange rows = rect_of.rows_covering(h, plane), columns = rect_of.columns_covering(w, plane);
    T total_grad = T(0);
    for (int64_t p = rows.begin; p < rows.end; ++p) {
      for (int64_t q = columns.begin; q < columns.end; ++q) {
        const PoolRect rect = rect_of(p, q, plane);
        if (!rect.contains(h, w)) continue;
        const M share = static_cast<M>(grad[p * plane.Q + q]) / static_cast<M>(rect.divisor);
        total_grad = static_cast<T>(static_cast<M>(total_grad) + share);
      }
    }
    grad_input[e] = total_grad;
  }
}

template <typename T>
void max_pool2d_typed(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window) {
  const PoolPlane plane = plane_of(input, out);
  const MaxWindow k = max_window(window);
  max_pool2d_kernel<T><<<grid_for(out.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<T*>(out.raw_data()), indices.data_ptr<int64_t>(), static_cast<const T*>(input.raw_data()), plane, k);
  SG_CUDA_CHECK_LAUNCH();
}

template <typename T>
void max_pool2d_backward_typed(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                               const Pool2dWindow& window) {
  max_pool2d_backward_kernel<T><<<grid_for(grad_input.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<T*>(grad_input.raw_data()), static_cast<const T*>(grad_out.raw_data()), indices.data_ptr<int64_t>(),
      plane_of(grad_input, grad_out), max_window(window));
  SG_CUDA_CHECK_LAUNCH();
}

template <typename T, typename RectOf>
void average_forward_typed(const Tensor& out, const Tensor& input, const RectOf& rect_of) {
  average_forward_kernel<T><<<grid_for(out.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<T*>(out.raw_data()), static_cast<const T*>(input.raw_data()), plane_of(input, out), rect_of);
  SG_CUDA_CHECK_LAUNCH();
}

template <typename T, typename RectOf>
void average_backward_typed(const Tensor& grad_input, const Tensor& grad_out, const RectOf& rect_of) {
  average_backward_kernel<T><<<grid_for(grad_input.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<T*>(grad_input.raw_data()), static_cast<const T*>(grad_out.raw_data()),
      plane_of(grad_input, grad_out), rect_of);
  SG_CUDA_CHECK_LAUNCH();
}

template <typename RectOf>
void average_forward(const Tensor& out, const Tensor& input, const RectOf& rect_of, const char* op_name) {
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device().index);
  const Tensor input_data = kernels::contiguous(input);
  SG_DISPATCH_FLOATING(out.dtype(), op_name, [&]<typename T>() { average_forward_typed<T>(out, input_data, rect_of); });
}

template <typename RectOf>
void average_backward(const Tensor& grad_input, const Tensor& grad_out, const RectOf& rect_of, const char* op_name) {
  if (grad_input.numel() == 0) return;
  const DeviceGuard guard(grad_input.device().index);
  const Tensor grad_out_data = kernels::contiguous(grad_out);
  SG_DISPATCH_FLOATING(grad_input.dtype(), op_name,
                       [&]<typename T>() { average_backward_typed<T>(grad_input, grad_out_data, rect_of); });
}

}  // namespace

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window) {
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device().index);
  const Tensor input_data = kernels::contiguous(input);
  SG_DISPATCH_FLOATING(out.dtype(), "max_pool2d",
                       [&]<typename T>() { max_pool2d_typed<T>(out, indices, input_data, window); });
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dWindow& window) {
  if (grad_input.numel() == 0) return;
  const DeviceGuard guard(grad_input.device().index);
  const Tensor grad_out_data = kernels::contiguous(grad_out), index_data = kernels::contiguous(indices);
  SG_DISPATCH_FLOATING(grad_input.dtype(), "max_pool2d_backward", [&]<typename T>() {
    max_pool2d_backward_typed<T>(grad_input, grad_out_data, index_data, window);
  });
}

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dWindow& window, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  average_forward(out, input, math::AvgPoolRect::make(window, count_include_pad, divisor_override), "avg_pool2d");
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dWindow& window,
                         bool count_include_pad, std::optional<int64_t> divisor_override) {
  average_backward(grad_input, grad_out, math::AvgPoolRect::make(window, count_include_pad, divisor_override),
                   "avg_pool2d_backward");
}

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input) {
  average_forward(out, input, math::AdaptiveRect{}, "adaptive_avg_pool2d");
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  average_backward(grad_input, grad_out, math::AdaptiveRect{}, "adaptive_avg_pool2d_backward");
}

}  // namespace sg::cuda
