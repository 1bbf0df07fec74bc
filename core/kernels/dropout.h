#pragma once
// defines: kernels::dropout, kernels::dropout_backward — dropout in one pass each way, behind
//          nn::functional::dropout.
//
// Contract: input is floating, any strides; out (input's dtype) and keep (bool) are contiguous, of
// input's shape, on its device. dropout draws keep exactly as bernoulli_(keep, 1 - p, generator)
// draws it (element i from half i % 2 of Philox block first + i / 2, core/kernels/random.h), and
// sets out = input * mask, where the mask is 1 / (1 - p) rounded to input's dtype where keep is
// true and 0 elsewhere. dropout_backward sets grad_input = grad * mask (grad contiguous). These are
// the values, and the random stream, of the three passes bernoulli_, scale, multiply, which is what
// a device without its own kernel runs; the CPU kernel decides, scales and writes in one.
#include "core/generator.h"
#include "core/tensor.h"

namespace sg::kernels {

void dropout(const Tensor& out, const Tensor& keep, const Tensor& input, double p, Generator& generator);
void dropout_backward(const Tensor& grad_input, const Tensor& grad, const Tensor& keep, double p);

}  // namespace sg::kernels
