#pragma once
// defines: the indexing kernel entry points (index_range, index_select, index_add, gather,
//          scatter_add, one_hot, triangle) that autograd/ops_index.cpp calls.
//
// Contract for every entry point: index tensors are i64 or i32 and every index value is in
// range (the op front checks with index_range first, so no kernel has to throw while threads
// run); outputs are allocated by the caller; all tensors are on one device.
#include <utility>

#include "core/tensor.h"

namespace sg::kernels {

// Calls fn.template operator()<index_t>() with the element type of an index tensor (i64 or i32):
// the CPU and the CUDA index kernels take either.
template <typename F>
decltype(auto) dispatch_index(DType dtype, F&& fn) {
  SG_CHECK(dtype == DType::i64 || dtype == DType::i32, "index kernels: expected an i64 or i32 index, got ", dtype);
  if (dtype == DType::i32) return fn.template operator()<int32_t>();
  return fn.template operator()<int64_t>();
}

// A contiguous tensor seen as an [outer, size, inner] block around `dim`: how both devices'
// index kernels walk the rows they select, gather or add.
struct RowLayout {
  int64_t outer = 1, size = 1, inner = 1;
};
inline RowLayout row_layout(const Shape& sizes, int64_t dim) {
  RowLayout layout;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim) layout.outer *= sizes[d];
    else if (d == dim) layout.size = sizes[d];
    else layout.inner *= sizes[d];
  }
  return layout;
}

// {smallest, largest} value of an integer index tensor with at least one element.
std::pair<int64_t, int64_t> index_range(const Tensor& index);

// out = x with dim `dim` replaced by the rows index (1-D, or 0-dim) names; out is contiguous,
// x any strides; same dtype.
void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
// dst[..., index[j], ...] += src[..., j, ...] along dim; dst contiguous, src any strides, same dtype.
// Duplicate indices accumulate, in increasing j, whatever the thread count.
void index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);

// out[p] = x[p with its `dim` coordinate replaced by index[p]]; out has index's shape.
void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
// dst[p with its `dim` coordinate replaced by index[p]] += src[p] for every position p of index;
// src may be larger than index (only index's positions are read). Deterministic order.
void scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);

// Sets out[i, indices[i]] = 1 in a zeroed, contiguous [indices.numel(), num_classes] tensor.
void one_hot(const Tensor& out, const Tensor& indices);

// tril (lower) or triu of the last two dims: keeps x[..., i, j] where j - i <= diagonal (lower)
// or j - i >= diagonal (upper), zero elsewhere. out is contiguous with x's shape and dtype.
void triangle(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower);

}  // namespace sg::kernels
