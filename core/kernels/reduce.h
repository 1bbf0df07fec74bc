#pragma once
// defines: the reduction kernel entry points (sum, extremum, var, norm, logsumexp).
//
// Contract: `dims` are sorted, unique, in range; every output is allocated by the caller,
// contiguous, with numel equal to the product of the kept dims (keepdim only changes its shape).
// Floating reductions accumulate in double and round once into the output's dtype. The fronts
// in autograd/ops_reduce.cpp check dtypes and empty dims before calling.
#include "core/tensor.h"

namespace sg {
enum class Extremum { max, min };
}  // namespace sg

namespace sg::kernels {

// Sum over dims, accumulating in double (floating) or i64 (integer, bool) and rounding once.
void sum(const Tensor& out, const Tensor& in, const Shape& dims);
// The max or min over dims (no reduced dim may be empty). `values` (in's dtype) and `indices`
// (i64: the position in the reduced dims flattened row-major, first occurrence on ties) may
// each be undefined when not wanted. NaN counts as larger and smaller than everything, so it
// propagates, as in PyTorch.
void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims);
// Variance over dims: sum((x - mean)^2) / (n - correction), two passes in double. Floating only.
void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction);
// The p-norm over dims: (sum |x|^p)^(1/p) for finite p > 0, max |x| for p = inf. Floating only.
void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p);
// log(sum(exp(x))) over dims, as m + log(sum(exp(x - m))) with m the max (taken as 0 when it
// is infinite, so rows of -inf give -inf and rows holding +inf give +inf). Each exp runs in
// opmath_t, the sum in double. Floating only.
void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims);

}  // namespace sg::kernels
