#pragma once
// defines: cuda::non_finite_check_and_unscale_ (core/cuda/amp.cu).
// The CUDA half of core/kernels/amp.h, which holds the contract: for its dispatch and the kernel only.
#include "core/kernels/amp.h"

namespace sg::cuda {
void non_finite_check_and_unscale_(const Tensor& grad, const Tensor& found_inf, double inv_scale);
}  // namespace sg::cuda
