#pragma once
// defines: the differentiable joining and indexing ops. Index tensors are i64 (i32 accepted);
//          an index out of range throws naming the op, the index and the size.
#include <optional>
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
// Rows of `weight` ([num_embeddings, embedding_dim]) picked by `indices` (any shape), as
// torch.nn.functional.embedding. Row padding_idx (negative: counted from the end), when given,
// gets no gradient: the lookups of that row add nothing to the weight's gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// padding_idx wrapped into [0, num_embeddings) (as wrap_dim wraps a dim); outside
// [-num_embeddings, num_embeddings) it throws naming op_name, padding_idx and num_embeddings.
std::optional<int64_t> wrap_padding_idx(std::optional<int64_t> padding_idx, int64_t num_embeddings,
                                        const char* op_name);
// As torch.embedding_renorm_: each row of `weight` that `indices` looks up and whose norm_type-norm
// exceeds max_norm is multiplied in place, outside autograd, by max_norm / (norm + 1e-7), which
// leaves its norm just under max_norm. Returns weight.
Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm, double norm_type = 2.0);
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);  // i64 result, not differentiable
Tensor tril(const Tensor& x, int64_t diagonal = 0);               // last two dims
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace sg
