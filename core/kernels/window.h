#pragma once
// defines: Size2, window_output_size — the geometry that convolution and pooling share: a
//          window slid over the height and width of an NCHW tensor.
//
// Output row p of a window covers the input rows p * stride - padding + i * dilation for
// i < kernel (columns likewise); rows outside [0, H) are padding.
#include <cstdint>
#include <string>

namespace sg {

// A (height, width) pair; one number means the same for both, as PyTorch's int-or-tuple
// arguments: conv2d(x, w, b, /*stride=*/2) or conv2d(x, w, b, /*stride=*/{2, 1}).
struct Size2 {
  int64_t h = 0;
  int64_t w = 0;
  Size2(int64_t both) : h(both), w(both) {}  // implicit on purpose: `stride = 2` reads as in PyTorch
  Size2(int64_t h, int64_t w) : h(h), w(w) {}
  bool operator==(const Size2&) const = default;
  std::string str() const {  // "(h, w)", as Python prints a tuple
    std::string text = "(";  // appended piece by piece: GCC 12 warns falsely on "(" + std::string (-Wrestrict)
    text += std::to_string(h);
    text += ", ";
    text += std::to_string(w);
    return text + ")";
  }
};

// The number of window positions along one dim (PyTorch's pooling_output_shape). With
// ceil_mode a last, partial window is kept when it starts inside the input or its left padding.
// May be <= 0 when the window does not fit: callers check and name their op.
inline int64_t window_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation,
                                  bool ceil_mode = false) {
  const int64_t span = input + 2 * padding - dilation * (kernel - 1) - 1;  // room for the window's first tap
  if (span < 0) return 0;
  int64_t size = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (size - 1) * stride >= input + padding) --size;
  return size;
}

}  // namespace sg
