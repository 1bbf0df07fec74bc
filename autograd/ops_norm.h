#pragma once
// defines: batch_norm, layer_norm — the differentiable normalisations, each one fused op
//          (forward and backward kernels in core/kernels/norm.h) rather than a chain of small ops.
#include "core/tensor.h"

namespace sg {

// Normalises each channel (dim 1) of input [N, C, ...] (at least 2-D), then scales by weight
// and shifts by bias ([C] each, or undefined for 1 and 0), as torch.nn.functional.batch_norm.
// training: the batch's mean and biased variance normalise; running_mean / running_var, when
//   defined, are updated in place: running = (1 - momentum) * running + momentum * batch, with
//   the UNBIASED batch variance. Needs more than one value per channel.
// eval: running_mean / running_var (required) normalise.
// Differentiable with respect to input, weight and bias (the running statistics are buffers).
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

// Normalises over the last dims of input, which must equal normalized_shape (biased variance),
// then applies weight and bias (normalized_shape each, or undefined), as
// torch.nn.functional.layer_norm.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace sg
