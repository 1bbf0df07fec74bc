#pragma once
// defines: the differentiable reductions and the softmax family. `dims` empty means all dims;
//          negative dims count from the end; keepdim keeps reduced dims with size 1.
//          f16/bf16 inputs are reduced in float or double and rounded once. Max and min (and
//          their arg forms) work on every dtype and throw on an empty reduced dim; var, norm and
//          the softmax family need a floating tensor. Kernels: core/kernels/reduce.h, softmax.h.
#include <optional>
#include <utility>

#include "core/tensor.h"

namespace sg {

Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Max over all of dims; the gradient is split evenly among tied maxima. NaN propagates.
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Values and i64 indices of the max/min along one dim (first occurrence on ties); the
// gradient of the values goes to the element the index names.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// Not differentiable. No dim: the index into the flattened (row-major) tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// sum((x - mean)^2) / (n - 1), or / n when not unbiased; two passes in double.
Tensor var(const Tensor& x, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
// (sum |x|^p)^(1/p) for any p > 0, max |x| for p = inf; the gradient is 0 where the norm is 0.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);

// Numerically stable: the max is subtracted before exponentiating. Fused kernels forward and
// backward, along any dim. A row of only -inf gives NaN (as PyTorch).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// log(sum(exp(x))) over dims; rows of only -inf give -inf, rows holding +inf give +inf.
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);

}  // namespace sg
