#pragma once
// defines: the pointwise kernel entry points (copy, fill, unary, binary, clamp, where) that
//          autograd's op fronts call once shapes are checked and outputs allocated.
//
// Contract for every entry point: `out` is allocated by the caller with the broadcast shape;
// inputs broadcast to it (the kernel reads them through stride-0 dims); all tensors are on one
// device. Entry points dispatch on that device to sg::cpu or sg::cuda.
#include <optional>

#include "core/pointwise_math.h"
#include "core/tensor.h"

namespace sg::kernels {

void copy(const Tensor& dst, const Tensor& src);  // converts dtype, broadcasts src
// `t` itself when it is contiguous, else a contiguous copy on its device (a kernel-level copy:
// no autograd). Kernels that want plain rows call it on their inputs.
Tensor contiguous(const Tensor& t);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, const Tensor& out, const Tensor& in);  // out.dtype == in.dtype
// a, b share a dtype; out has it too, or bool for comparisons. `alpha` scales b in add/sub.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1.0);
void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max);
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b);

}  // namespace sg::kernels
