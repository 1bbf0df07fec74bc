#pragma once
// defines: cpu::gemm (core/cpu/gemm.cpp).
// The CPU half of core/kernels/gemm.h, which holds the contract: for its dispatch and the kernel only.
#include "core/kernels/gemm.h"

namespace sg::cpu {
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);
}  // namespace sg::cpu
