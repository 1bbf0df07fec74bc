#pragma once
// defines: the fused batch-norm and layer-norm kernels, forward and backward.
//
// Shape letters: N batch, C channels, S the positions per channel and sample (the product of
// the dims after C: 1 for [N, C], L for [N, C, L], H*W for [N, C, H, W]); for layer norm,
// M rows (the product of the leading dims) of K elements (the normalised dims).
//
// Contract: outputs are allocated by the caller, contiguous; `out` and `grad_input` have the
// input's shape and dtype. Statistics (`mean`, `invstd`) are [C] (batch norm) or [M] (layer
// norm) in the compute dtype: f64 for f64 inputs, f32 otherwise. weight, bias and the running
// statistics are [C] (or [K]) in the input's dtype and may be undefined where noted; the
// fronts in autograd/ops_norm.cpp check all of this before calling. Each statistic is a
// two-pass mean and variance accumulated in double, so the result does not depend on the
// thread count. Every gradient output may be undefined when it is not wanted.
#include "core/tensor.h"

namespace sg::kernels {

struct BatchNormArgs {
  Tensor weight, bias;               // [C] or undefined (then 1 and 0)
  Tensor running_mean, running_var;  // [C]; undefined when training without tracking stats
  bool training = true;              // batch statistics (else the running ones)
  double momentum = 0.1;             // running = (1 - momentum) * running + momentum * batch
  double eps = 1e-5;
};

// y = (x - mean) * invstd * weight + bias per channel, invstd = 1 / sqrt(var + eps).
// Training: mean and var are the batch's (biased var), written to `mean` / `invstd`, and the
// running statistics (when defined) move towards the batch's mean and UNBIASED var. Eval: the
// running statistics normalise, and `mean` / `invstd` receive them for the backward.
void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input,
                const BatchNormArgs& args);
// With xhat = (x - mean) * invstd and dy the output gradient, per channel:
//   grad_weight = sum(dy * xhat), grad_bias = sum(dy),
//   grad_input  = invstd * w * (dy - mean(dy) - xhat * mean(dy * xhat))  when training,
//   grad_input  = invstd * w * dy                                         in eval.
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training);

// Each row of K = `row_length` trailing elements: y = (x - mean) * rstd * weight + bias, with
// the row's biased variance; weight and bias are [K] or undefined.
void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, int64_t row_length, double eps);
// grad_input = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) per row, dxhat = dy * w;
// grad_weight = sum over rows of dy * xhat, grad_bias = sum over rows of dy.
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, int64_t row_length);

}  // namespace sg::kernels
