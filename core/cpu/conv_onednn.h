#pragma once
// defines: cpu::onednn::try_conv2d, try_conv2d_grad_input, try_conv2d_grad_weight, implementation — the
//          CPU convolutions on oneDNN primitives (core/cpu/conv_onednn.cpp), for core/cpu/conv.cpp only.
//
// Each try_ function runs the call and returns true where oneDNN's blocked direct kernels beat the
// im2col + GEMM reference (Note [When oneDNN runs] in the .cpp): f32, no empty dim, a pass and shape
// the rule picks, and a direct kernel for it in oneDNN. Otherwise it does nothing and returns false,
// and core/cpu/conv.cpp runs the reference. Same contract as the kernels in core/kernels/conv.h:
// inputs of any strides, outputs contiguous.
#include <string>

#include "core/cpu/conv_kernels.h"

namespace sg::cpu::onednn {

bool try_conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                const Conv2dParams& params);
bool try_conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& params);
bool try_conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& params);

// The oneDNN kernel that runs `pass` and the operands reordered around it (e.g. "jit:avx2, reorders
// input, weight, out"), or "" where the try_ function declines it (cpu::conv2d_implementation).
std::string implementation(ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                           const Conv2dParams& params);

}  // namespace sg::cpu::onednn
