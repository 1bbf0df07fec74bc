#pragma once
// defines: convert<out_t, in_t> — one element converted between dtypes, as copy_ / to(dtype) do
//          it; shared by the CPU copy and the CUDA copy so both round identically.
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"
#include "core/host_device.h"

namespace sg {

// To bool is "nonzero"; otherwise through the compute types, so int -> float is exact where the
// float can hold it. A 16-bit float computes in float, which cannot hold every f64, i64 or i32
// value: those go through round_to_odd_float so that the value is rounded once (core/half.h),
// not once to float and again to 16 bits (an i64 beyond 2^53 is still rounded to f64 first).
// Floating values outside an integer type's range (and NaN) have no defined integer result in
// C++; CPU and GPU may differ there, as they do in PyTorch.
template <typename out_t, typename in_t>
SG_HOST_DEVICE inline out_t convert(in_t x) {
  using in_math_t = opmath_t<in_t>;
  using out_math_t = opmath_t<out_t>;
  constexpr bool narrow_float_out = std::is_same_v<out_t, Half> || std::is_same_v<out_t, BFloat16>;
  constexpr bool wider_than_float_in =
      std::is_same_v<in_t, double> || std::is_same_v<in_t, int64_t> || std::is_same_v<in_t, int32_t>;
  if constexpr (std::is_same_v<out_t, bool>) return static_cast<in_math_t>(x) != in_math_t(0);
  else if constexpr (narrow_float_out && wider_than_float_in) return out_t(round_to_odd_float(static_cast<double>(x)));
  else return static_cast<out_t>(static_cast<out_math_t>(static_cast<in_math_t>(x)));
}

}  // namespace sg
