#include "data/plain_copy.h"

#include <cstring>

#include "core/factory.h"

namespace sg::data {

namespace {
void check_cpu(const Tensor& t) {
  SG_CHECK(t.device().is_cpu(), "data: loading and transforming work on CPU tensors, got one on ", t.device());
}

// Copies the sub-tensor of `src` at `dim` and below, starting at `source` (bytes), to `dst`;
// returns the byte just past what it wrote. The innermost dim is copied element by element.
char* copy_dim(char* dst, const char* source, const Tensor& src, int64_t dim) {
  const size_t item = src.element_size();
  const int64_t size = src.sizes()[dim];
  const int64_t stride_bytes = src.strides()[dim] * static_cast<int64_t>(item);
  if (dim == src.dim() - 1) {
    for (int64_t i = 0; i < size; ++i, dst += item) std::memcpy(dst, source + i * stride_bytes, item);
    return dst;
  }
  for (int64_t i = 0; i < size; ++i) dst = copy_dim(dst, source + i * stride_bytes, src, dim + 1);
  return dst;
}
}  // namespace

void copy_elements(void* dst, const Tensor& src) {
  check_cpu(src);
  const size_t nbytes = static_cast<size_t>(src.numel()) * src.element_size();
  if (nbytes == 0) return;
  if (src.is_contiguous() || src.dim() == 0) {
    std::memcpy(dst, src.raw_data(), nbytes);
    return;
  }
  copy_dim(static_cast<char*>(dst), static_cast<const char*>(src.raw_data()), src, 0);
}

Tensor contiguous_plain(const Tensor& t) {
  check_cpu(t);
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.sizes(), {t.dtype(), t.device()});
  copy_elements(out.raw_data(), t);
  return out;
}

}  // namespace sg::data
