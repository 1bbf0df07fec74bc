#pragma once
// defines: sort, argsort, topk — ordering along one dim, as torch.sort / argsort / topk.
//          Kernel: core/kernels/sort.h (one stable sort for all three).
//
// Every dtype sorts; NaN counts as larger than everything (last ascending, first descending),
// -0 equals +0. Ties keep their original order whatever `stable` says (the sort is always
// stable, which PyTorch allows for stable = false), and topk picks tied values by position, first
// positions first. The values are gather(x, dim, indices): differentiable for a floating x, the
// gradient going back to the position each value was taken from. Indices are i64. A 0-dim x acts
// as one element.
#include <utility>

#include "core/tensor.h"

namespace sg {

// (values, indices) with x's shape, each row along `dim` in ascending (or descending) order.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The indices of sort alone.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) values along `dim` and their indices, 0 <= k <= x.size(dim).
// sorted = false is accepted, as in PyTorch, whose order is then unspecified: here the result
// comes sorted anyway.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

}  // namespace sg
