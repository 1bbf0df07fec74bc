#pragma once
// defines: sort_key — an unsigned 64-bit key per element whose integer order is the sort order
//          of the elements, shared by the CPU and CUDA sort kernels (core/kernels/sort.h).
//
// Note [Sorting by an order-preserving key]
// Both devices sort keys, never values: one compare (or one radix pass) then works the same for
// every dtype, and the two devices cannot disagree about NaN or -0. The key of
//   - an integer (bool, u8, i32, i64) is its two's complement with the sign bit flipped, so
//     negative numbers come first;
//   - a float (f16 and bf16 widened to float, every float widened to double, both exact) is its
//     IEEE bits with the sign bit flipped for positives and all bits flipped for negatives, so
//     -inf < -1 < -0 < +0 < 1 < inf as unsigned integers; -0 is first made +0 (they are equal),
//     and every NaN gets the largest key (PyTorch sorts NaN above inf, all NaNs alike);
//   - in a descending sort, the complement of the ascending key (NaN then comes first, as in
//     PyTorch).
// Equal values get equal keys, so a sort that breaks ties by position is a stable sort.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/host_device.h"

namespace sg {

namespace detail {

SG_HOST_DEVICE inline uint64_t double_bits(double value) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(value));
#else
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

SG_HOST_DEVICE inline uint64_t integer_key(int64_t value) { return static_cast<uint64_t>(value) ^ (uint64_t(1) << 63); }

SG_HOST_DEVICE inline uint64_t floating_key(double value) {
  if (value != value) return ~uint64_t(0);  // NaN: above everything
  if (value == 0) value = 0.0;              // -0 sorts with +0
  const uint64_t bits = double_bits(value);
  return bits >> 63 ? ~bits : bits | (uint64_t(1) << 63);
}

}  // namespace detail

template <typename scalar_t>
SG_HOST_DEVICE inline uint64_t sort_key(scalar_t value, bool descending) {
  uint64_t key;
  if constexpr (std::is_integral_v<scalar_t>) key = detail::integer_key(static_cast<int64_t>(value));
  else key = detail::floating_key(static_cast<double>(static_cast<opmath_t<scalar_t>>(value)));
  return descending ? ~key : key;
}

}  // namespace sg
