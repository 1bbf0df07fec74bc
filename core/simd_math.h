#pragma once
// defines: math::exp_f32, math::erf_f32 — float exp and erf as branch-free polynomial arithmetic,
//          so that a loop calling them vectorises (glibc's expf and erff are one call per
//          element, which the compiler cannot vectorise); math::exp_of, math::erf_of pick them
//          for f32 and the C library for f64. Compiled for the host and the GPU (SG_HOST_DEVICE),
//          so the CPU tests check the code the GPU runs.
//
// Note [Branch-free float math]
// A vectorised loop computes 8 floats at once, so a function of x may not branch on x: each
// formula here is computed for every x, and select_f32 picks the right one with a bit mask.
// Both functions are within 1.5 ulp of the exact value (tests/test_simd_math.cpp sweeps them
// against the double functions). f32 kernels use them where the C library's would be the hot
// spot (GELU, the attention's softmax); f64 kernels keep the C library's full double accuracy,
// which gradcheck needs.
#include <cmath>
#include <cstdint>

#include "core/half.h"  // detail::float_bits, detail::bits_float (bit casts for host and GPU)
#include "core/host_device.h"

namespace sg::math {

// condition ? if_true : if_false, as bit masks. Written as `condition ? a : b`, the compiler moves
// the arithmetic of a and b into the two branches and then may not compute it for lanes that the
// branch skips (it could raise a floating-point exception), so the loop stops vectorising.
SG_HOST_DEVICE inline float select_f32(bool condition, float if_true, float if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);  // all ones or all zeros
  return detail::bits_float((detail::float_bits(if_true) & mask) | (detail::float_bits(if_false) & ~mask));
}

// exp(x) within 1.5 ulp (1.0 measured over every float in [-87.3, 88.3]). Cephes's expf:
// x = n ln2 + r with |r| <= ln2 / 2, exp(r) by a degree-6 polynomial, 2^n put into the exponent
// bits. Below -87.3 (where exp leaves the normal floats; a masked attention score is -inf) the
// result is exactly 0. 2^n must be a normal float, so from x = 88.37 on (n = 128) the result is
// inf, where the exact one is above 2.4e38, 70% of the largest float; every caller here passes
// x <= 0. NaN stays NaN.
SG_HOST_DEVICE inline float exp_f32(float x) {
  const float shifted = x * 1.44269504f + 12582912.0f;  // adding 1.5 * 2^23 rounds to an integer
  const float n = shifted - 12582912.0f;
  // 2^n as float bits: n sits in the low bits of `shifted`; unsigned, so any x wraps instead of overflowing.
  const uint32_t two_to_n = (detail::float_bits(shifted) - detail::float_bits(12582912.0f) + 127u) << 23;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln2 in two parts, for an exact n ln2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float result = (p * r * r + r + 1.0f) * detail::bits_float(two_to_n);
  const float finite = select_f32(x < -87.3f, 0.0f, result);               // 0 below -87.3, NaN stays NaN
  return select_f32(x > 88.37f, detail::bits_float(0x7F800000u), finite);  // inf
}

// erf(x) within 1.5 ulp (1.1 measured over every float in [1e-6, 6]). Two formulas:
// - |x| < 0.921875: erf(x) = x + x R(x^2), R a degree-5 polynomial fitted to erf(x)/x - 1 (the
//   small correction is added to x last, so its rounding errors are scaled down);
// - larger |x|: erf(|x|) = 1 - exp(Q(|x|)), Q a degree-6 polynomial fitted to log(erfc(|x|)) on
//   [0.921875, 4]: erfc falls like exp(-x^2), so its log is smooth and nearly a parabola.
//   |x| is clamped to 4, where 1 - erfc already rounds to 1 in float.
// The coefficients are weighted-minimax fits (tests/reference/fit_erf_coefficients.py).
SG_HOST_DEVICE inline float erf_f32(float x) {
  const float t = x * x;
  float r = -5.99087565e-04f;
  r = r * t + 4.99318540e-03f;
  r = r * t + -2.67666206e-02f;
  r = r * t + 1.12818167e-01f;
  r = r * t + -3.76124948e-01f;
  r = r * t + 1.28379151e-01f;
  const float near_zero = x + x * r;

  const uint32_t sign = detail::float_bits(x) & 0x80000000u;
  const float a = detail::bits_float(detail::float_bits(x) ^ sign);  // |x|
  const float clamped = select_f32(a > 4.0f, 4.0f, a);               // NaN stays NaN
  float q = 1.95720946e-04f;
  q = q * clamped + -3.04109557e-03f;
  q = q * clamped + 2.22184621e-02f;
  q = q * clamped + -1.03914045e-01f;
  q = q * clamped + -6.37202263e-01f;
  q = q * clamped + -1.12766373e+00f;
  q = q * clamped + -1.98551628e-04f;
  const float far_from_zero = detail::bits_float(detail::float_bits(1.0f - exp_f32(q)) | sign);
  return select_f32(a < 0.921875f, near_zero, far_from_zero);
}

// exp and erf in a kernel's compute type: f32 (also that of f16 and bf16) takes the branch-free
// versions above; f64 keeps the C library's (full double accuracy, which gradcheck needs), and so
// do integers (computed in double).
SG_HOST_DEVICE inline float exp_of(float x) { return exp_f32(x); }
SG_HOST_DEVICE inline float erf_of(float x) { return erf_f32(x); }
template <typename T>
SG_HOST_DEVICE inline auto exp_of(T x) {
  using std::exp;
  return exp(x);
}
template <typename T>
SG_HOST_DEVICE inline auto erf_of(T x) {
  using std::erf;
  return erf(x);
}

}  // namespace sg::math
