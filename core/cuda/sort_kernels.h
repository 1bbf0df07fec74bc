#pragma once
// defines: cuda::sorted_positions (core/cuda/sort.cu).
// The CUDA half of core/kernels/sort.h, which holds the contract: for its dispatch and the kernel only.
#include "core/kernels/sort.h"

namespace sg::cuda {
void sorted_positions(const Tensor& positions, const Tensor& x, bool descending);
}  // namespace sg::cuda
