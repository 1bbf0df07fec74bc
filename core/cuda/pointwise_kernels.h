#pragma once
// defines: the CUDA pointwise kernels — cuda::copy, copy_on_device, fill, unary, binary, clamp, where.
// The CUDA half of core/kernels/pointwise.h, which holds the contract: for its dispatch and the kernels only.
#include <optional>

#include "core/kernels/pointwise.h"

namespace sg::cuda {
// core/cuda/copy.cpp: any two devices, at least one a GPU; transfers go through contiguous
// staging and the conversion runs on the GPU side.
void copy(const Tensor& dst, const Tensor& src);
// core/cuda/pointwise.cu: every tensor on the output's GPU.
void copy_on_device(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, const Tensor& out, const Tensor& in);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max);
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b);
}  // namespace sg::cuda
