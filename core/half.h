#pragma once
// defines: sg::Half, sg::BFloat16 — 16-bit float storage types with exact IEEE rounding.
//
// Both are stored as raw 16 bits and convert to/from float. Arithmetic is never done in
// 16 bits: kernels load to float, compute, and round once on store, which is what a GPU
// does too. Conversions from float round to nearest, ties to even, so a value rounded
// here equals the value a GPU would produce. Functions are constexpr and free of
// library calls so CUDA code can share them later.
#include <cstdint>
#include <cstring>

namespace sg {

namespace detail {
inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
}  // namespace detail

uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);

// bf16 is the top half of an f32; rounding adds 0x7FFF plus the lowest kept bit (ties to even).
inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = detail::float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return static_cast<uint16_t>(u >> 16);
}
inline float bfloat16_bits_to_float(uint16_t b) { return detail::bits_float(uint32_t(b) << 16); }

// `d` rounded to float "to odd": truncated, with the last bit set when bits were dropped. A value
// rounded this way keeps enough information that rounding it again to a narrower format (f16,
// bf16) gives the correctly rounded result of `d`, so double -> float -> half rounds only once.
inline float round_to_odd_float(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || d != d) return f;
  uint32_t u = detail::float_bits(f);
  if (d > 0 ? static_cast<double>(f) > d : static_cast<double>(f) < d) --u;  // rounded away from zero: step back
  return detail::bits_float(u | 1u);
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(float_to_half_bits(f)) {}  // NOLINT: implicit like a builtin float type
  operator float() const { return half_bits_to_float(bits); }
  static Half from_bits(uint16_t b) { Half h; h.bits = b; return h; }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}  // NOLINT: implicit on purpose
  operator float() const { return bfloat16_bits_to_float(bits); }
  static BFloat16 from_bits(uint16_t b) { BFloat16 h; h.bits = b; return h; }
};

}  // namespace sg
