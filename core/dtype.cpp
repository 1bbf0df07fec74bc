#include "core/dtype.h"

namespace sg {

size_t itemsize(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

bool is_integral(DType dtype) { return !is_floating(dtype); }

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

namespace {
int category(DType d) { return d == DType::boolean ? 0 : is_floating(d) ? 2 : 1; }
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (is_floating(a)) {
    if (a == DType::f64 || b == DType::f64) return DType::f64;
    return DType::f32;  // any mix of f32, f16, bf16
  }
  // Integers: u8 mixes with signed types as the wider signed one.
  if (a == DType::i64 || b == DType::i64) return DType::i64;
  if (a == DType::i32 || b == DType::i32) return DType::i32;
  return DType::u8;
}

}  // namespace sg
