#pragma once
// defines: PhiloxBlock, philox4x32_10, uniform_float, uniform_double, RandomDraw and the draw
//          transforms of the random fills (math::draw_uniform, draw_normal, draw_randint,
//          draw_bernoulli, draw) and of multinomial (math::draw_category) —
//          compiled for the host and for the GPU (SG_HOST_DEVICE), so that a fill on either
//          computes the same numbers from the same (seed, counter).
//
// Note [Random numbers are the same on every device]
// A random fill's element i draws from Philox block (first + i / 2), half i % 2 (core/kernels/random.h),
// and turns the bits into a value with the transforms below. Philox and the bit-to-double steps are
// integer or exact floating operations; where a transform multiplies and adds, it calls fma itself,
// so neither compiler may fuse (or not fuse) the two differently. uniform_, randint_ and bernoulli_
// are therefore bit-identical on the CPU and the GPU. normal_ also calls log, cos and sin, which the
// CUDA math library rounds within 1-2 ulp of double where glibc is correctly rounded: its double
// results may differ in the last bit (after rounding to f32 or narrower, practically never).
#include <cmath>
#include <cstdint>
#include <numbers>

#include "core/host_device.h"

namespace sg {

// Four independent 32-bit words.
struct PhiloxBlock {
  uint32_t word[4];
};

// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) of
// counter `counter` under key `seed`.
SG_HOST_DEVICE inline PhiloxBlock philox4x32_10(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c[4] = {uint32_t(counter), uint32_t(counter >> 32), 0, 0};
  uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0];
    const uint64_t p1 = uint64_t(kMul1) * c[2];
    const uint32_t next[4] = {uint32_t(p1 >> 32) ^ c[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ key[1],
                              uint32_t(p0)};
    c[0] = next[0];
    c[1] = next[1];
    c[2] = next[2];
    c[3] = next[3];
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return {{c[0], c[1], c[2], c[3]}};
}

// Converts random bits to a float in [0, 1) with 24 (or 53) random mantissa bits.
SG_HOST_DEVICE inline float uniform_float(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}
SG_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>((uint64_t(hi) << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
}

namespace math {

// The uniform in [0, 1) of half `half` (0 or 1) of a block.
SG_HOST_DEVICE inline double uniform01(int half, const PhiloxBlock& block) {
  return uniform_double(block.word[2 * half], block.word[2 * half + 1]);
}

// low + span * u, with u keeping only the bits of a grid of `grid` steps per unit, rounded down
// (so that storing the draw in a narrow dtype never rounds it up to high).
SG_HOST_DEVICE inline double draw_uniform(int half, const PhiloxBlock& block, double low, double span, double grid) {
  using std::floor;
  using std::fma;
  return fma(span, floor(uniform01(half, block) * grid) / grid, low);
}

// Box-Muller: the two uniforms of a block give two independent normals, mean + std * radius *
// cos(angle) for half 0 and the same with sin for half 1.
struct BoxMuller {
  double scaled_radius, angle;  // std * radius, angle
};
SG_HOST_DEVICE inline BoxMuller box_muller(const PhiloxBlock& block, double std) {
  using std::log;
  using std::sqrt;
  const double u1 = 1.0 - uniform01(0, block);  // (0, 1], so log is finite
  const double u2 = uniform01(1, block);
  return {std * sqrt(-2.0 * log(u1)), (2.0 * std::numbers::pi) * u2};
}
SG_HOST_DEVICE inline double draw_normal(int half, const PhiloxBlock& block, double mean, double std) {
  using std::cos;
  using std::fma;
  using std::sin;
  const BoxMuller polar = box_muller(block, std);
  return fma(polar.scaled_radius, half == 0 ? cos(polar.angle) : sin(polar.angle), mean);
}
// Both halves' normals from one log and one sqrt: what draw_normal(0, ...) and draw_normal(1, ...)
// return, bit for bit (the CPU fill draws whole blocks).
SG_HOST_DEVICE inline void draw_normal_pair(const PhiloxBlock& block, double mean, double std, double& first,
                                            double& second) {
  using std::cos;
  using std::fma;
  using std::sin;
  const BoxMuller polar = box_muller(block, std);
  first = fma(polar.scaled_radius, cos(polar.angle), mean);
  second = fma(polar.scaled_radius, sin(polar.angle), mean);
}

// An integer in [low, low + range): Lemire's multiply-shift of 64 random bits.
SG_HOST_DEVICE inline int64_t draw_randint(int half, const PhiloxBlock& block, int64_t low, uint64_t range) {
  const uint64_t bits = uint64_t(block.word[2 * half]) << 32 | block.word[2 * half + 1];
  return low + static_cast<int64_t>((static_cast<unsigned __int128>(bits) * range) >> 64);
}

SG_HOST_DEVICE inline double draw_bernoulli(int half, const PhiloxBlock& block, double p) {
  return uniform01(half, block) < p ? 1.0 : 0.0;
}

// A category in [0, n) drawn with probability proportional to its weight, from the running sums
// of the weights, cdf[i] = w[0] + ... + w[i] (cdf[n - 1] > 0): the first i with cdf[i] > u * total.
// A category of weight 0 does not raise the running sum, so no u lands on it.
SG_HOST_DEVICE inline int64_t draw_category(int half, const PhiloxBlock& block, const double* cdf, int64_t n) {
  using std::fmin;
  using std::nextafter;
  const double total = cdf[n - 1];
  // u < 1, but u * total can round up to total; the largest double below it stays in range.
  const double target = fmin(uniform01(half, block) * total, nextafter(total, 0.0));
  int64_t low = 0, high = n - 1;  // binary search: the answer is always in [low, high]
  while (low < high) {
    const int64_t middle = low + (high - low) / 2;
    if (cdf[middle] > target) high = middle;
    else low = middle + 1;
  }
  return low;
}

}  // namespace math

// What a random fill draws for each element: the transform and its parameters, built once per
// fill by core/kernels/random.cpp and handed to the CPU or GPU loop.
struct RandomDraw {
  enum class Kind : uint8_t { uniform, normal, randint, bernoulli };
  Kind kind = Kind::uniform;
  double low = 0, span = 1, grid = 0;  // uniform: low + span * u, u on a grid of `grid` steps
  double mean = 0, std = 1;            // normal
  int64_t int_low = 0;                 // randint: int_low + [0, int_range)
  uint64_t int_range = 1;
  double p = 0.5;  // bernoulli
};

namespace math {

// Element value of half `half` of `block`, as a double; the fill converts it to its dtype.
SG_HOST_DEVICE inline double draw(const RandomDraw& d, int half, const PhiloxBlock& block) {
  switch (d.kind) {
    case RandomDraw::Kind::uniform: return draw_uniform(half, block, d.low, d.span, d.grid);
    case RandomDraw::Kind::normal: return draw_normal(half, block, d.mean, d.std);
    case RandomDraw::Kind::randint: return static_cast<double>(draw_randint(half, block, d.int_low, d.int_range));
    case RandomDraw::Kind::bernoulli: return draw_bernoulli(half, block, d.p);
  }
  return 0.0;
}

}  // namespace math
}  // namespace sg
