#include "core/shape.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace sg {

int64_t numel_of(const Shape& sizes) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;  // whatever the other sizes
  int64_t n = 1;
  for (int64_t s : sizes)
    SG_CHECK(!__builtin_mul_overflow(n, s, &n), "numel_of: the shape ", shape_str(sizes),
             " has more than 2^63 - 1 elements");
  return n;
}

bool fits_int64_indexing(const Shape& sizes) {
  int64_t extent = 1;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(extent, std::max<int64_t>(s, 1), &extent)) return false;
  return true;
}

Shape contiguous_strides(const Shape& sizes) {
  SG_CHECK(fits_int64_indexing(sizes), "contiguous_strides: the shape ", shape_str(sizes),
           " needs strides above 2^63 - 1 (the product of its sizes, 0 counted as 1, overflows int64)");
  Shape strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& sizes) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ']';
  return out.str();
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op_name) {
  const size_t ndim = std::max(a.size(), b.size());
  Shape result(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    // Align from the right: missing leading dims count as 1.
    const int64_t da = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const int64_t db = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    SG_CHECK(da == db || da == 1 || db == 1, op_name, ": shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")");
    result[i] = da == 1 ? db : da;
  }
  return result;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op_name) {
  const int64_t bound = std::max<int64_t>(ndim, 1);
  SG_CHECK(dim >= -bound && dim < bound, op_name, ": dim ", dim, " out of range for a tensor with ", ndim, " dims");
  return dim < 0 ? dim + bound : dim;
}

}  // namespace sg
