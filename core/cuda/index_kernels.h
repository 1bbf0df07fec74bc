#pragma once
// defines: the CUDA indexing kernels — cuda::index_range, index_select, index_add, gather, scatter_add,
//          one_hot, triangle (core/cuda/index.cu).
// The CUDA half of core/kernels/index.h, which holds the contract: for its dispatch and the kernels only.
#include <utility>

#include "core/kernels/index.h"

namespace sg::cuda {
std::pair<int64_t, int64_t> index_range(const Tensor& index);
void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
void index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);
void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
void scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);
void one_hot(const Tensor& out, const Tensor& indices);
void triangle(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower);
}  // namespace sg::cuda
