#pragma once
// defines: Generator, default_generator, manual_seed — every random draw in syncgrad.
#include <cstdint>
#include <string>

namespace sg {

// A Philox-4x32-10 counter-based generator (as PyTorch's CUDA and JAX use): the n-th number of
// a stream depends only on (seed, n), so a kernel can jump to any offset and split work across
// threads — or GPU threads — without changing the result. State is just (seed, offset).
class Generator {
public:
  explicit Generator(uint64_t seed = 67280421310721ull) { manual_seed(seed); }
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }

  // Reserves `count` 128-bit blocks for one op and returns the first block's index; the op then
  // draws block i with philox(seed, first + i), in any order or thread.
  uint64_t reserve(uint64_t count) { uint64_t first = offset_; offset_ += count; return first; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

  // Four independent 32-bit words for counter `block`.
  struct Block { uint32_t word[4]; };
  Block philox(uint64_t block) const;

private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds the default generator

// Converts random bits to a float in [0, 1) with 24 (or 53) random mantissa bits.
inline float uniform_float(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }
inline double uniform_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>((uint64_t(hi) << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
}

}  // namespace sg
