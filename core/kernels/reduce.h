#pragma once
// defines: the reduction kernel entry points.
//
// Contract: `dims` are sorted, unique, in range; `out` is allocated by the caller, contiguous,
// with numel equal to the product of the kept dims (keepdim only changes its shape).
#include "core/tensor.h"

namespace sg::kernels {

// Sum over dims, accumulating in double (floating) or i64 (integer, bool) and rounding once.
void sum(const Tensor& out, const Tensor& in, const Shape& dims);

}  // namespace sg::kernels

namespace sg::cpu {

void sum(const Tensor& out, const Tensor& in, const Shape& dims);

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
