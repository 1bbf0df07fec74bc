// Differentiable reductions and the softmax family; each forward is followed by its backward.
#include "autograd/ops_reduce.h"

#include <algorithm>

#include "autograd/function.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/reduce.h"

namespace sg {

using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Sorted, unique, wrapped dims; empty means all dims.
Shape normalize_dims(const Tensor& x, const Shape& dims, const char* op_name) {
  Shape result;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) result.push_back(d);
    return result;
  }
  for (int64_t d : dims) result.push_back(wrap_dim(d, x.dim(), op_name));
  std::sort(result.begin(), result.end());
  SG_CHECK(std::adjacent_find(result.begin(), result.end()) == result.end(), op_name, ": dim repeated in ",
           shape_str(dims));
  return result;
}

// The output shape of reducing `dims` (normalized) of `shape`.
Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape result;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) result.push_back(shape[d]);
    else if (keepdim) result.push_back(1);
  }
  return result;
}

// A gradient of a reduced output, broadcast back over the input's shape.
// (Reshaping to the keepdim shape works whether or not the output kept its dims.)
Tensor expand_reduced_grad(const Tensor& g, const Shape& input_shape, const Shape& dims) {
  return expand(reshape(g, reduced_shape(input_shape, dims, true)), input_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  const Shape reduce_dims = normalize_dims(x, dims, "sum");
  const DType dtype = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  Tensor out = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {dtype, x.device()});
  kernels::sum(out, x, reduce_dims);
  // d/dx sum(x) = 1 for every element: broadcast the gradient back
  return record("SumBackward", out, {x}, [input_shape = x.sizes(), reduce_dims](const Tensor& g, const NeedsGrad&) {
    return TensorList{expand_reduced_grad(g, input_shape, reduce_dims)};
  });
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  SG_CHECK(is_floating(x.dtype()), "mean: expected a floating tensor, got ", x.dtype());
  const Shape reduce_dims = normalize_dims(x, dims, "mean");
  int64_t count = 1;
  for (int64_t d : reduce_dims) count *= x.size(d);
  // mean = sum / count; the division records its own (trivial) backward
  return div(sum(x, reduce_dims, keepdim), static_cast<double>(count));
}

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return sg::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return sg::mean(*this, dims, keepdim); }

}  // namespace sg
