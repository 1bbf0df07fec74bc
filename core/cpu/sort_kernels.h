#pragma once
// defines: cpu::sorted_positions (core/cpu/sort.cpp).
// The CPU half of core/kernels/sort.h, which holds the contract: for its dispatch and the kernel only.
#include "core/kernels/sort.h"

namespace sg::cpu {
void sorted_positions(const Tensor& positions, const Tensor& x, bool descending);
}  // namespace sg::cpu
