#pragma once
// defines: kernels::gemm — the one matrix-product kernel every product op (matmul, mm, bmm,
//          addmm, and later linear and convolution) runs on; kernels::gemm_bias — the same
//          product with a Linear layer's bias added to every row.
//
// Contract: out[..., m, n] = alpha * (a[..., m, k] @ b[..., k, n]) + beta * out, for every index of
// the batch dims `...` (none for a plain matrix product).
// - a, b and out have the same rank (>= 2), the same batch sizes and one dtype; a and b may be
//   broadcast views (stride 0 on batch dims) and may have any strides, so a transpose or a slice
//   is passed as it is (see Note [GEMM operand layouts] in core/cpu/gemm.cpp for what is copied).
// - out is allocated by the caller, and overlaps neither itself nor a or b.
// - beta == 0 ignores out's previous values (NaN or garbage included), as BLAS does.
// - floating dtypes accumulate in f32 (f16, bf16, f32) or f64, and f16/bf16 results are rounded
//   once from f32; integer dtypes accumulate in their own type (wrapping as PyTorch's do).
#include "core/tensor.h"

namespace sg::kernels {

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1.0, double beta = 0.0);

// out[m, n] = a[m, k] @ b[k, n] + bias[n] for every row: a Linear layer's product with its bias.
// 2-D operands as gemm's (any strides; out allocated by the caller, its values ignored), bias 1-D
// [n] of their dtype.
// f32 on a CPU whose f32 GEMM is oneDNN's adds the bias inside the product (Note [The bias inside
// the GEMM] in core/cpu/gemm_onednn.cpp); everywhere else out is filled with the bias and gemm
// adds the product to it (beta = 1).
void gemm_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);

}  // namespace sg::kernels
