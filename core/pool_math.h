#pragma once
// defines: math::PoolPlane, math::TapRange / taps_inside, math::PoolRect, math::AvgPoolRect and
//          math::AdaptiveRect — the window geometry of the pooling kernels, shared by the CPU
//          kernels (core/cpu/pool.cpp) and the CUDA kernels (core/cuda/pool.cu), so both pool
//          exactly the same taps and divide by the same count.
#include <algorithm>
#include <cstdint>

#include "core/host_device.h"
#include "core/kernels/pool.h"

namespace sg::math {

struct PoolPlane {
  int64_t count, H, W, P, Q;  // count = N C planes of H x W in, P x Q out
};

// The taps of window position `o` along one dim that fall inside [0, size): begin is the first such
// tap (a multiple of dilation past the window's start), end bounds the taps (step: dilation).
struct TapRange {
  int64_t begin, end;
};
SG_HOST_DEVICE inline TapRange taps_inside(int64_t o, int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                                           int64_t dilation) {
  const int64_t start = o * stride - padding;
  const int64_t end = std::min(start + (kernel - 1) * dilation + 1, size);
  const int64_t skipped = start < 0 ? (-start + dilation - 1) / dilation : 0;  // taps on the leading padding
  return TapRange{start + skipped * dilation, end};
}

// What one output of an average pooling averages: input rows [h_begin, h_end) x columns
// [w_begin, w_end), summed and divided by `divisor`. An empty rectangle gives 0.
struct PoolRect {
  int64_t h_begin, h_end, w_begin, w_end, divisor;
  SG_HOST_DEVICE bool empty() const { return h_begin >= h_end || w_begin >= w_end; }
  SG_HOST_DEVICE bool contains(int64_t h, int64_t w) const {
    return h >= h_begin && h < h_end && w >= w_begin && w < w_end;
  }
};

// avg_pool2d's window, exactly as PyTorch counts it: padding taps count only with count_include_pad,
// and never the taps beyond the padding that ceil_mode's last window may reach.
struct AvgPoolRect {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool count_include_pad, has_divisor_override;
  int64_t divisor_override;

  static AvgPoolRect make(const Pool2dWindow& window, bool count_include_pad, std::optional<int64_t> divisor_override) {
    return {window.kernel_size.h,
            window.kernel_size.w,
            window.stride.h,
            window.stride.w,
            window.padding.h,
            window.padding.w,
            count_include_pad,
            divisor_override.has_value(),
            divisor_override.value_or(0)};
  }

  SG_HOST_DEVICE PoolRect operator()(int64_t p, int64_t q, const PoolPlane& plane) const {
    const int64_t h_start = p * stride_h - pad_h, w_start = q * stride_w - pad_w;
    const int64_t h_stop = std::min(h_start + kernel_h, plane.H + pad_h);
    const int64_t w_stop = std::min(w_start + kernel_w, plane.W + pad_w);
    PoolRect rect{std::max<int64_t>(h_start, 0), std::min(h_stop, plane.H), std::max<int64_t>(w_start, 0),
                  std::min(w_stop, plane.W), 0};
    if (has_divisor_override) rect.divisor = divisor_override;
    else if (count_include_pad) rect.divisor = (h_stop - h_start) * (w_stop - w_start);
    else rect.divisor = (rect.h_end - rect.h_begin) * (rect.w_end - rect.w_begin);
    return rect;
  }

  // Output rows p whose rectangle may hold input row h (a superset; callers test contains()).
  SG_HOST_DEVICE TapRange rows_covering(int64_t h, const PoolPlane& plane) const {
    return {std::max<int64_t>(0, (h + pad_h - kernel_h) / stride_h), std::min(plane.P, (h + pad_h) / stride_h + 1)};
  }
  SG_HOST_DEVICE TapRange columns_covering(int64_t w, const PoolPlane& plane) const {
    return {std::max<int64_t>(0, (w + pad_w - kernel_w) / stride_w), std::min(plane.Q, (w + pad_w) / stride_w + 1)};
  }
};

// adaptive_avg_pool2d's window: [floor(p H / P), ceil((p + 1) H / P)), columns likewise.
struct AdaptiveRect {
  SG_HOST_DEVICE PoolRect operator()(int64_t p, int64_t q, const PoolPlane& plane) const {
    const int64_t h_begin = p * plane.H / plane.P, h_end = ((p + 1) * plane.H + plane.P - 1) / plane.P;
    const int64_t w_begin = q * plane.W / plane.Q, w_end = ((q + 1) * plane.W + plane.Q - 1) / plane.Q;
    return PoolRect{h_begin, h_end, w_begin, w_end, (h_end - h_begin) * (w_end - w_begin)};
  }

  // Output rows p whose rectangle may hold input row h: floor(p H / P) <= h < ceil((p + 1) H / P)
  // gives p in [floor(h P / H), floor(((h + 1) P - 1) / H)]; one more on each side, callers test contains().
  SG_HOST_DEVICE TapRange rows_covering(int64_t h, const PoolPlane& plane) const {
    return {std::max<int64_t>(0, h * plane.P / plane.H - 1), std::min(plane.P, ((h + 1) * plane.P - 1) / plane.H + 2)};
  }
  SG_HOST_DEVICE TapRange columns_covering(int64_t w, const PoolPlane& plane) const {
    return {std::max<int64_t>(0, w * plane.Q / plane.W - 1), std::min(plane.Q, ((w + 1) * plane.Q - 1) / plane.W + 2)};
  }
};

}  // namespace sg::math
