#pragma once
// defines: DType, itemsize, dtype_name, is_floating, promote_types, CppType<DType>,
//          SG_DISPATCH_* macros that turn a runtime dtype into a template parameter.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace sg {

enum class DType : uint8_t { f32, f64, f16, bf16, i64, i32, u8, boolean };

size_t itemsize(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "f64", ... as printed in errors
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // includes bool
std::ostream& operator<<(std::ostream& out, DType dtype);

// Result dtype of a binary op, as PyTorch promotes: bool < integers < floating; within a
// category the wider type wins; f16 with bf16 gives f32.
DType promote_types(DType a, DType b);

// One-line tables read best as tables.
// clang-format off
// The C++ element type stored for each dtype (bool is stored as one byte holding 0 or 1).
template <DType> struct CppType;
template <> struct CppType<DType::f32> { using type = float; };
template <> struct CppType<DType::f64> { using type = double; };
template <> struct CppType<DType::f16> { using type = Half; };
template <> struct CppType<DType::bf16> { using type = BFloat16; };
template <> struct CppType<DType::i64> { using type = int64_t; };
template <> struct CppType<DType::i32> { using type = int32_t; };
template <> struct CppType<DType::u8> { using type = uint8_t; };
template <> struct CppType<DType::boolean> { using type = bool; };

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

// The type kernels compute in: 16-bit floats widen to float, every float keeps its width.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;
// clang-format on

}  // namespace sg

// clang-format off
// SG_DISPATCH_FLOATING(dtype, "op", [&]<typename scalar_t>() { ... }) calls the lambda with
// scalar_t bound to the element type; other dtypes throw naming the op.
#define SG_DISPATCH_CASE(enum_value, fn) \
  case ::sg::DType::enum_value: return fn.template operator()<typename ::sg::CppType<::sg::DType::enum_value>::type>();

#define SG_DISPATCH_FLOATING(dtype, op_name, fn)                                           \
  [&]() {                                                                                  \
    switch (dtype) {                                                                       \
      SG_DISPATCH_CASE(f32, fn) SG_DISPATCH_CASE(f64, fn) SG_DISPATCH_CASE(f16, fn)        \
      SG_DISPATCH_CASE(bf16, fn)                                                           \
      default: SG_FAIL(op_name, ": expected a floating dtype, got ", dtype); \
    }                                                                                      \
  }()

#define SG_DISPATCH_ALL(dtype, op_name, fn)                                                \
  [&]() {                                                                                  \
    switch (dtype) {                                                                       \
      SG_DISPATCH_CASE(f32, fn) SG_DISPATCH_CASE(f64, fn) SG_DISPATCH_CASE(f16, fn)        \
      SG_DISPATCH_CASE(bf16, fn) SG_DISPATCH_CASE(i64, fn) SG_DISPATCH_CASE(i32, fn)       \
      SG_DISPATCH_CASE(u8, fn) SG_DISPATCH_CASE(boolean, fn)                               \
    }                                                                                      \
    SG_FAIL(op_name, ": unknown dtype");                   \
  }()

// Numeric dtypes only (no bool): arithmetic such as sum or mul.
#define SG_DISPATCH_NUMERIC(dtype, op_name, fn)                                            \
  [&]() {                                                                                  \
    switch (dtype) {                                                                       \
      SG_DISPATCH_CASE(f32, fn) SG_DISPATCH_CASE(f64, fn) SG_DISPATCH_CASE(f16, fn)        \
      SG_DISPATCH_CASE(bf16, fn) SG_DISPATCH_CASE(i64, fn) SG_DISPATCH_CASE(i32, fn)       \
      SG_DISPATCH_CASE(u8, fn)                                                             \
      default: SG_FAIL(op_name, ": not supported for dtype ", dtype); \
    }                                                                                      \
  }()
// clang-format on
