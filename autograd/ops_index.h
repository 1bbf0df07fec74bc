#pragma once
// defines: the differentiable joining and indexing ops. Index tensors are i64 (i32 accepted);
//          an index out of range throws naming the op, the index and the size.
#include <vector>

#include "core/tensor.h"

namespace sg {

Tensor cat(const TensorList& tensors, int64_t dim = 0);
Tensor stack(const TensorList& tensors, int64_t dim = 0);
TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);  // last piece may be smaller
TensorList split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[i][index[i][j]] along `dim` (for dim 1 of a 2-D x), as torch.gather.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with src added at the positions index names along `dim`, as torch.scatter_add.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// Rows of `weight` ([num_embeddings, embedding_dim]) picked by `indices` (any shape).
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);  // i64 result, not differentiable
Tensor tril(const Tensor& x, int64_t diagonal = 0);  // last two dims
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace sg
