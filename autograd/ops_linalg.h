#pragma once
// defines: the differentiable matrix products. All of them run on the one GEMM in
//          core/cpu/gemm.cpp (see docs/performance.md for why it is the BLAS it is).
#include "core/tensor.h"

namespace sg {

// torch.matmul: 1-D·1-D dot, 2-D·2-D matrix product, 1-D operands promoted to a matrix and the
// added dim removed afterwards, batched with broadcast batch dims for 3-D and more.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   // [n, k] x [k, m]
Tensor bmm(const Tensor& a, const Tensor& b);  // [B, n, k] x [B, k, m]
// beta * input + alpha * (a @ b), input broadcast to [n, m] (a Linear layer's bias + x W^T).
Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, double beta = 1.0, double alpha = 1.0);
// beta * input + alpha * bmm(a, b), input broadcast to [B, n, m] (attention scores plus a mask).
Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, double beta = 1.0, double alpha = 1.0);

// input @ weight^T + bias, as torch.nn.functional.linear: weight [out, in], bias [out] or undefined.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace sg
