#pragma once
// defines: Generator, default_generator, manual_seed — every random draw in syncgrad.
#include <cstdint>
#include <string>

#include "core/philox.h"  // defines: PhiloxBlock, philox4x32_10, uniform_float, uniform_double

namespace sg {

// A Philox-4x32-10 counter-based generator (as PyTorch's CUDA and JAX use): the n-th number of
// a stream depends only on (seed, n), so a kernel can jump to any offset and split work across
// threads — or GPU threads — without changing the result. State is just (seed, offset).
class Generator {
public:
  explicit Generator(uint64_t seed = 67280421310721ull) { manual_seed(seed); }
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }

  // Reserves `count` 128-bit blocks for one op and returns the first block's index; the op then
  // draws block i with philox(seed, first + i), in any order or thread.
  uint64_t reserve(uint64_t count) {
    uint64_t first = offset_;
    offset_ += count;
    return first;
  }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

  // Four independent 32-bit words for counter `block` (core/philox.h, shared with the GPU).
  using Block = PhiloxBlock;
  Block philox(uint64_t block) const { return philox4x32_10(seed_, block); }

private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds the default generator

}  // namespace sg
