#pragma once
// defines: the CUDA reductions — cuda::sum, extremum, var, norm, logsumexp (core/cuda/reduce.cu).
// The CUDA half of core/kernels/reduce.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/reduce.h"

namespace sg::cuda {
void sum(const Tensor& out, const Tensor& in, const Shape& dims);
void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims);
void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction);
void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p);
void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims);
}  // namespace sg::cuda
