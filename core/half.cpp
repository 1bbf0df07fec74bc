#include "core/half.h"

namespace sg {

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
uint16_t float_to_half_bits(float f) {
  const uint32_t u = detail::float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;              // NaN stays NaN (quiet)
  if (abs >= 0x47800000u) return sign | 0x7C00u;             // >= 65536 (or inf): overflow to inf
  if (abs < 0x38800000u) {                                   // below 2^-14: subnormal or zero
    // Shift the implicit-1 mantissa into subnormal position, rounding to nearest even.
    if (abs < 0x33000000u) return sign;                      // < 2^-25 rounds to zero
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;                   // 14..24
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

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return detail::bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return detail::bits_float(sign);
    // Subnormal: normalise by shifting until the implicit bit appears.
    int e = -1;
    do { ++e; mantissa <<= 1; } while ((mantissa & 0x400u) == 0);
    return detail::bits_float(sign | uint32_t(127 - 15 - e) << 23 | (mantissa & 0x3FFu) << 13);
  }
  return detail::bits_float(sign | (exponent + 112) << 23 | mantissa << 13);
}

}  // namespace sg
