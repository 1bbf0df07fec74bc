#pragma once
// defines: cpu::random_fill, cpu::multinomial_with_replacement (core/cpu/random.cpp).
// The CPU half of core/kernels/random.h, which holds the contract: for its dispatch and the kernels only.
#include "core/kernels/random.h"
#include "core/philox.h"

namespace sg::cpu {
void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name);
void multinomial_with_replacement(const Tensor& out, const Tensor& probs, uint64_t seed, uint64_t first);
}  // namespace sg::cpu
