#pragma once
// defines: the differentiable shape ops. Views share storage with their input; the others copy.
#include "core/tensor.h"

namespace sg {

Tensor view(const Tensor& x, Shape shape);     // one -1 allowed; needs compatible strides
Tensor reshape(const Tensor& x, Shape shape);  // a view when possible, else a copy
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x);               // all size-1 dims
Tensor squeeze(const Tensor& x, int64_t dim);  // that dim, if its size is 1
Tensor expand(const Tensor& x, const Shape& shape);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Arbitrary strided view (sizes/strides/offset in elements) of x's storage; checked against it.
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t storage_offset);

Tensor contiguous(const Tensor& x);             // x itself if already contiguous
Tensor clone(const Tensor& x);                  // always a new contiguous copy
Tensor to_dtype(const Tensor& x, DType dtype);  // x itself if already that dtype
Tensor to_device(const Tensor& x, Device device);
// Writes src (broadcast, converted) into dst; differentiable w.r.t. both.
Tensor& copy_(Tensor& dst, const Tensor& src);

}  // namespace sg
