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
// Both directions are written without branches: every case is computed and the right one
// selected, so that a loop converting a tensor vectorises (a branchy version ran 4x slower than
// the bf16 conversions, at about 2 GB/s). The subnormal cases let the FPU do the work: adding 0.5
// to a float below 2^-14 rounds it, to nearest even, onto the grid of f16 subnormals (0.5's ulp
// is 2^-24); and a subnormal f16 read as 2^-14 · (1 + m/1024) minus 2^-14 is exactly m · 2^-24.
SG_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = detail::float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7FFFFFFFu;
  // Normal range: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits, ties to
  // even; a carry into the exponent (even to inf) is correct.
  const uint32_t normal = (abs - 0x38000000u + 0xFFFu + ((abs >> 13) & 1u)) >> 13;
  const uint32_t subnormal = detail::float_bits(detail::bits_float(abs) + 0.5f) - 0x3F000000u;
  uint32_t result = abs < 0x38800000u ? subnormal : normal;  // below 2^-14
  result = abs >= 0x47800000u ? 0x7C00u : result;            // >= 65536 (or inf): overflow to inf
  result = abs > 0x7F800000u ? 0x7E00u : result;             // NaN stays NaN (quiet)
  return static_cast<uint16_t>(sign | result);
}

SG_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t magnitude = uint32_t(h & 0x7FFFu) << 13;  // exponent and mantissa in float's places
  const uint32_t normal = magnitude + 0x38000000u;         // rebias the exponent (15 -> 127)
  const uint32_t subnormal = detail::float_bits(detail::bits_float(magnitude + 0x38800000u) - 6.103515625e-05f);
  uint32_t result = magnitude < 0x00800000u ? subnormal : normal;        // exponent 0: zero or subnormal
  result = magnitude >= 0x0F800000u ? magnitude + 0x70000000u : result;  // exponent 31: inf or NaN
  return detail::bits_float(sign | result);
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
