#pragma once
// defines: cpu::dropout, cpu::dropout_backward (core/cpu/dropout.cpp).
// The CPU half of core/kernels/dropout.h, which holds the contract: for its dispatch and the kernels only.
#include <cstdint>

#include "core/kernels/dropout.h"

namespace sg::cpu {
// input contiguous; its draws are Philox blocks first, first + 1, ... under `seed`.
void dropout(const Tensor& out, const Tensor& keep, const Tensor& input, double p, uint64_t seed, uint64_t first);
void dropout_backward(const Tensor& grad_input, const Tensor& grad, const Tensor& keep, double p);
}  // namespace sg::cpu
