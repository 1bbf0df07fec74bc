#pragma once
// defines: Shape, numel_of, contiguous_strides, fits_int64_indexing, broadcast_shapes, wrap_dim,
//          shape_str.
#include <cstdint>
#include <string>
#include <vector>

namespace sg {

using Shape = std::vector<int64_t>;

// Both throw, naming the shape, where int64 cannot hold the result (an element count or a stride
// above 2^63 - 1: shapes from a file header can ask for that).
int64_t numel_of(const Shape& sizes);
Shape contiguous_strides(const Shape& sizes);

// Whether a row-major tensor of `sizes` can be addressed with int64: the product of the sizes,
// dims of 0 counted as 1, fits. That product bounds the element count and every stride (strides
// step over a dim of 0 as if it were 1, so [0, 2^32, 2^32] has no elements but a stride of 2^64).
// Readers of file headers check it to report the file instead of a bare shape.
bool fits_int64_indexing(const Shape& sizes);

std::string shape_str(const Shape& sizes);  // "[2, 3]"

// NumPy broadcasting; throws naming `op_name` and both shapes when they cannot broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op_name);

// Turns a possibly negative dim into [0, ndim); `ndim` 0 accepts dim 0 and -1 (scalars).
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op_name);

}  // namespace sg
