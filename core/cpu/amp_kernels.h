#pragma once
// defines: cpu::non_finite_check_and_unscale_ (core/cpu/amp.cpp).
// The CPU half of core/kernels/amp.h, which holds the contract: for its dispatch and the kernel only.
#include "core/kernels/amp.h"

namespace sg::cpu {
void non_finite_check_and_unscale_(const Tensor& grad, const Tensor& found_inf, double inv_scale);
}  // namespace sg::cpu
