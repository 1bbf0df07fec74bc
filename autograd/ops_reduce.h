#pragma once
// defines: the differentiable reductions and the softmax family. `dims` empty means all dims;
//          negative dims count from the end; keepdim keeps reduced dims with size 1.
#include <optional>
#include <utility>

#include "core/tensor.h"

namespace sg {

Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);  // max over all of dims
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Values and i64 indices of the max/min along one dim (first occurrence on ties).
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);

// Numerically stable: the max is subtracted before exponentiating.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);

}  // namespace sg
