#pragma once
// defines: the CPU pointwise kernels — cpu::copy, fill, unary, binary, clamp, where (core/cpu/pointwise.cpp).
// The CPU half of core/kernels/pointwise.h, which holds the contract: for its dispatch, the kernels, and the
// host side of a copy between devices (core/cuda/copy.cpp).
#include <optional>

#include "core/kernels/pointwise.h"

namespace sg::cpu {
void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, const Tensor& out, const Tensor& in);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max);
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b);
}  // namespace sg::cpu
