#pragma once
// defines: cpu::onednn::try_gemm_bias — a Linear layer's product with its bias added by oneDNN's matmul
//          primitive (core/cpu/gemm_onednn.cpp), for core/kernels/gemm.cpp only.
#include "core/tensor.h"

namespace sg::cpu::onednn {

// out[m, n] = a[m, k] @ b[k, n] + bias[n] in one oneDNN call, returning true; or nothing at all and
// false where that path does not apply (Note [The bias inside the GEMM]), and the caller runs the
// plain GEMM. Shapes and dtypes are the caller's to check.
bool try_gemm_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);

}  // namespace sg::cpu::onednn
