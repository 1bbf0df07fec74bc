#pragma once
// defines: sg::Half, sg::BFloat16 — 16-bit float storage types with exact IEEE rounding.
//
// Both are stored as raw 16 bits and convert to/from float. Arithmetic is never done in
// 16 bits: kernels load to float, compute, and round once on store, which is what a GPU
// does too. Conversions from float round to nearest, ties to even. Every function here is
// SG_HOST_DEVICE and free of library calls, so the CUDA kernels round with the very code the
// CPU tests check (all 65536 bit patterns in tests/test_dtype.cpp).
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace sg {

namespace detail {
SG_HOST_DEVICE inline uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
SG_HOST_DEVICE inline float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
}  // namespace detail

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
SG_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = detail::float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;   // NaN stays NaN (quiet)
  if (abs >= 0x47800000u) return sign | 0x7C00u;  // >= 65536 (or inf): overflow to inf
  if (abs < 0x38800000u) {                        // below 2^-14: subnormal or zero
    // Shift the implicit-1 mantissa into subnormal position, rounding to nearest even.
    if (abs < 0x33000000u) return sign;  // < 2^-25 rounds to zero
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal range: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits.
  uint32_t result = abs - 0x38000000u;
  const uint32_t lsb = (result >> 13) & 1u;
  result += 0xFFFu + lsb;
  return sign | static_cast<uint16_t>(result >> 13);  // a carry into the exponent (even to inf) is correct
}

SG_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return detail::bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return detail::bits_float(sign);
    // Subnormal: normalise by shifting until the implicit bit appears.
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    return detail::bits_float(sign | uint32_t(127 - 15 - e) << 23 | (mantissa & 0x3FFu) << 13);
  }
  return detail::bits_float(sign | (exponent + 112) << 23 | mantissa << 13);
}

// bf16 is the top half of an f32; rounding adds 0x7FFF plus the lowest kept bit (ties to even).
SG_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = detail::float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return static_cast<uint16_t>(u >> 16);
}
SG_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) { return detail::bits_float(uint32_t(b) << 16); }

// `d` rounded to float "to odd": truncated, with the last bit set when bits were dropped. A value
// rounded this way keeps enough information that rounding it again to a narrower format (f16,
// bf16) gives the correctly rounded result of `d`, so double -> float -> half rounds only once.
SG_HOST_DEVICE inline float round_to_odd_float(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || d != d) return f;
  uint32_t u = detail::float_bits(f);
  if (d > 0 ? static_cast<double>(f) > d : static_cast<double>(f) < d) --u;  // rounded away from zero: step back
  return detail::bits_float(u | 1u);
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  SG_HOST_DEVICE Half(float f) : bits(float_to_half_bits(f)) {}  // NOLINT: implicit like a builtin float type
  SG_HOST_DEVICE operator float() const { return half_bits_to_float(bits); }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  SG_HOST_DEVICE BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}  // NOLINT: implicit on purpose
  SG_HOST_DEVICE operator float() const { return bfloat16_bits_to_float(bits); }
};

}  // namespace sg
