#pragma once
// defines: Shape, numel_of, contiguous_strides, broadcast_shapes, wrap_dim, shape_str.
#include <cstdint>
#include <string>
#include <vector>

namespace sg {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& sizes);
Shape contiguous_strides(const Shape& sizes);
std::string shape_str(const Shape& sizes);  // "[2, 3]"

// NumPy broadcasting; throws naming `op_name` and both shapes when they cannot broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op_name);

// Turns a possibly negative dim into [0, ndim); `ndim` 0 accepts dim 0 and -1 (scalars).
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op_name);

}  // namespace sg
