#pragma once
// defines: the CPU reductions — cpu::sum, extremum, var, norm, logsumexp — and the rows they reduce,
//          ReductionRows and as_reduction_rows (core/cpu/reduce.cpp).
// The CPU half of core/kernels/reduce.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/reduce.h"

namespace sg::cpu {

void sum(const Tensor& out, const Tensor& in, const Shape& dims);
void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims);
void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction);
void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p);
void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims);

// Note [Reductions as rows]
// Every CPU reduction first arranges its input as a contiguous [rows, row_length] matrix:
// kept dims first (in order), reduced dims last, copying only when the input is not already
// laid out that way. Each output element then reduces one contiguous row, which is both simple
// and fast, and parallel over rows needs no synchronisation.
struct ReductionRows {
  Tensor data;             // contiguous, dtype of the input
  int64_t rows = 0;        // = number of outputs
  int64_t row_length = 0;  // = number of elements reduced into each output
};
ReductionRows as_reduction_rows(const Tensor& in, const Shape& dims);

}  // namespace sg::cpu
