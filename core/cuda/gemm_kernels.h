#pragma once
// defines: cuda::gemm (core/cuda/gemm.cpp, cuBLAS).
// The CUDA half of core/kernels/gemm.h, which holds the contract: for its dispatch and the kernel only.
#include "core/kernels/gemm.h"

namespace sg::cuda {
// Floating dtypes only: an integer product is an error, as in PyTorch. Beyond the contract, f16 or
// bf16 operands may write an f32 out (f32 accumulation, never rounded to 16 bits): the attention
// kernel's scores.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);
}  // namespace sg::cuda
