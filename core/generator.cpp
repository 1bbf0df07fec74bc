#include "core/generator.h"

namespace sg {

Generator::Block Generator::philox(uint64_t block) const {
  // Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c[4] = {uint32_t(block), uint32_t(block >> 32), 0, 0};
  uint32_t key[2] = {uint32_t(seed_), uint32_t(seed_ >> 32)};
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0];
    const uint64_t p1 = uint64_t(kMul1) * c[2];
    const uint32_t next[4] = {uint32_t(p1 >> 32) ^ c[1] ^ key[0], uint32_t(p1),
                              uint32_t(p0 >> 32) ^ c[3] ^ key[1], uint32_t(p0)};
    c[0] = next[0]; c[1] = next[1]; c[2] = next[2]; c[3] = next[3];
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return {{c[0], c[1], c[2], c[3]}};
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace sg
