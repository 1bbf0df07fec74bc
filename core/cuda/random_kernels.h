#pragma once
// defines: cuda::random_fill, cuda::multinomial_with_replacement (core/cuda/random.cu).
// The CUDA half of core/kernels/random.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/random.h"
#include "core/philox.h"

namespace sg::cuda {
void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name);
void multinomial_with_replacement(const Tensor& out, const Tensor& probs, uint64_t seed, uint64_t first);
}  // namespace sg::cuda
