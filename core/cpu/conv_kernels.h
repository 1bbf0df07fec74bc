#pragma once
// defines: cpu::conv2d, conv2d_grad_input, conv2d_grad_weight, their im2col + GEMM references, ConvPass and
//          conv2d_implementation (core/cpu/conv.cpp).
// The CPU half of core/kernels/conv.h, which holds the contract: for its dispatch, the kernels and the tests and
// benchmark that compare the oneDNN path with the reference.
#include <string>

#include "core/kernels/conv.h"

namespace sg::cpu {
// f32 (and f16 and bf16, computed in f32) on oneDNN where its blocked kernels beat the reference below
// for the pass and shapes (core/cpu/conv_onednn.cpp), the rest on the reference.
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
            const Conv2dParams& params);
void conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                       const Conv2dParams& params);
void conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                        const Conv2dParams& params);

// The reference, for every floating dtype: im2col + GEMM (Note [Convolution as GEMM] in
// core/cpu/conv.cpp), short enough to read, and the oracle the oneDNN path is tested against. Its weight
// gradient sums the images in an order fixed by N alone, so it does not depend on the thread count.
void conv2d_reference(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& params);
void conv2d_grad_input_reference(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                                 const Conv2dParams& params);
void conv2d_grad_weight_reference(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                                  const Conv2dParams& params);

enum class ConvPass { forward, grad_input, grad_weight };
// What cpu::conv2d (forward), conv2d_grad_input or conv2d_grad_weight runs for these shapes and dtype
// at the current thread count, e.g. "oneDNN jit:avx2, reorders input, weight, out" or "im2col + GEMM".
std::string conv2d_implementation(ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                                  const Conv2dParams& params);
}  // namespace sg::cpu
