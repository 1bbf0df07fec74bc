#pragma once
// defines: cpu::PhiloxBatch, cpu::philox_batch — kPhiloxBatch consecutive Philox blocks at once,
//          the same bits as philox4x32_10 (core/philox.h) block by block, for the CPU's random fills.
//
// One Philox-4x32-10 block is ten dependent rounds of two 32x32->64-bit multiplies; computed one
// block at a time, the core mostly waits for the previous round. Sixteen blocks side by side fill
// two sets of AVX2 registers (8 counters each, _mm256_mul_epu32 for the multiplies), which keeps
// the multipliers busy: about 3x the blocks per second of the scalar function on the Zen 3 of
// docs/performance.md. With AVX-512 they fill one set of 512-bit registers: bernoulli_ 1.22 ->
// 0.94 ns per element on the Zen 5 there. GCC does not vectorise the scalar function well by
// itself (its widening multiplies turn into shuffles), hence the intrinsics. A build with neither
// (SG_NATIVE=OFF) computes the batch with philox4x32_10, block by block.
#include <cstdint>

namespace sg::cpu {

inline constexpr int kPhiloxBatch = 16;

// word[w][l] is word w of Philox block (first_counter + l) under key `seed`: each word in its own
// array, so that a loop over the blocks reads it with unit stride (and vectorises).
struct PhiloxBatch {
  uint32_t word[4][kPhiloxBatch];
};

PhiloxBatch philox_batch(uint64_t seed, uint64_t first_counter);

}  // namespace sg::cpu
