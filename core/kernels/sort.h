#pragma once
// defines: kernels::sorted_positions — the one sorting kernel entry point, behind sort, argsort,
//          topk (autograd/ops_sort.cpp) and multinomial without replacement.
//
// Contract: x has at least one dim, any dtype and any strides, and is ordered along its last dim
// by sort_key (Note [Sorting by an order-preserving key], core/sort_key.h): ascending, or
// descending; equal values keep their original order (a stable sort) on both devices.
// `positions` is i64, contiguous, allocated by the caller with x's shape except its last dim,
// k <= x.size(-1): row r receives the positions (0 .. size - 1) of x's row r that come first
// in that order. k = size is argsort; a smaller k is topk. The front gathers the values.
#include "core/tensor.h"

namespace sg::kernels {
void sorted_positions(const Tensor& positions, const Tensor& x, bool descending);
}  // namespace sg::kernels
