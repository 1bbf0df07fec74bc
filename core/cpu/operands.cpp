#include "core/cpu/operands.h"

namespace sg::cpu {

std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& shape) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const int64_t offset = ndim - t.dim();
  SG_CHECK(offset >= 0, "broadcast: tensor of shape ", shape_str(t.sizes()), " has more dims than ", shape_str(shape));
  std::vector<int64_t> strides(shape.size(), 0);
  const int64_t item = static_cast<int64_t>(t.element_size());
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t size = t.size(d);
    SG_CHECK(size == shape[d + offset] || size == 1, "broadcast: shape ", shape_str(t.sizes()),
             " cannot be broadcast to ", shape_str(shape));
    strides[d + offset] = size == 1 ? 0 : t.stride(d) * item;
  }
  return strides;
}

}  // namespace sg::cpu
