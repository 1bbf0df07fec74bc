#pragma once
// defines: UnaryOp, BinaryOp, their names and the per-element math for each — one definition shared by
//          the CPU kernels and the CUDA kernels, so the CPU tests check both.
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/simd_math.h"

namespace sg {

enum class UnaryOp { neg, exp, log, sqrt, rsqrt, abs, sign, tanh, sigmoid, relu, gelu_erf, gelu_tanh };

enum class BinaryOp {
  add,
  sub,
  mul,
  div,
  pow,
  maximum,
  minimum,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,  // produce bool
  relu_backward,
  gelu_erf_backward,
  gelu_tanh_backward  // (grad, x) -> grad * f'(x)
};

inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::eq && op <= BinaryOp::ge; }

// The op's name in profiles and test reports ("gelu_tanh", "mul").
constexpr const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::abs: return "abs";
    case UnaryOp::sign: return "sign";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::relu: return "relu";
    case UnaryOp::gelu_erf: return "gelu_erf";
    case UnaryOp::gelu_tanh: return "gelu_tanh";
  }
  return "?";
}

constexpr const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::pow: return "pow";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    case BinaryOp::eq: return "eq";
    case BinaryOp::ne: return "ne";
    case BinaryOp::lt: return "lt";
    case BinaryOp::le: return "le";
    case BinaryOp::gt: return "gt";
    case BinaryOp::ge: return "ge";
    case BinaryOp::relu_backward: return "relu_backward";
    case BinaryOp::gelu_erf_backward: return "gelu_erf_backward";
    case BinaryOp::gelu_tanh_backward: return "gelu_tanh_backward";
  }
  return "?";
}

namespace math {

inline constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double kGeluCubic = 0.044715;
inline constexpr double kInvSqrt2 = 0.7071067811865476;
inline constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2*pi)

template <typename T>
SG_HOST_DEVICE inline T unary(UnaryOp op, T x) {
  using std::abs;
  using std::exp;
  using std::log;
  using std::sqrt;
  using std::tanh;
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return exp(x);
    case UnaryOp::log: return log(x);
    case UnaryOp::sqrt: return sqrt(x);
    case UnaryOp::rsqrt: return T(1) / sqrt(x);
    case UnaryOp::abs: return x < T(0) ? -x : x;
    case UnaryOp::sign: return T((x > T(0)) - (x < T(0)));
    case UnaryOp::tanh: return tanh(x);
    // Written so exp never overflows: for x < 0 use e^x / (1 + e^x).
    case UnaryOp::sigmoid: return x >= T(0) ? T(1) / (T(1) + exp(-x)) : exp(x) / (T(1) + exp(x));
    case UnaryOp::relu: return x > T(0) ? x : T(0);
    case UnaryOp::gelu_erf: return T(0.5) * x * (T(1) + erf_of(x * T(kInvSqrt2)));
    case UnaryOp::gelu_tanh: return T(0.5) * x * (T(1) + tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
  }
  return x;
}

template <typename T>
SG_HOST_DEVICE inline T binary(BinaryOp op, T a, T b, T alpha) {
  using std::pow;
  using std::tanh;
  switch (op) {
    case BinaryOp::add: return a + alpha * b;
    case BinaryOp::sub: return a - alpha * b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::pow: return T(pow(a, b));
    case BinaryOp::maximum: return a > b || a != a ? a : b;  // NaN propagates, as in torch.maximum
    case BinaryOp::minimum: return a < b || a != a ? a : b;
    case BinaryOp::eq: return T(a == b);
    case BinaryOp::ne: return T(a != b);
    case BinaryOp::lt: return T(a < b);
    case BinaryOp::le: return T(a <= b);
    case BinaryOp::gt: return T(a > b);
    case BinaryOp::ge: return T(a >= b);
    case BinaryOp::relu_backward: return b > T(0) ? a : T(0);
    // d/dx x*Phi(x) = Phi(x) + x*phi(x)
    case BinaryOp::gelu_erf_backward: {
      const T cdf = T(0.5) * (T(1) + erf_of(b * T(kInvSqrt2)));
      const T pdf = T(kInvSqrt2Pi) * exp_of(T(-0.5) * b * b);
      return a * (cdf + b * pdf);
    }
    // d/dx 0.5x(1+tanh(u)), u = k(x + c x^3): 0.5(1+tanh u) + 0.5x(1-tanh^2 u) k(1 + 3c x^2)
    case BinaryOp::gelu_tanh_backward: {
      const T u = T(kSqrt2OverPi) * (b + T(kGeluCubic) * b * b * b);
      const T t = tanh(u);
      const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * b * b);
      return a * (T(0.5) * (T(1) + t) + T(0.5) * b * (T(1) - t * t) * du);
    }
  }
  return a;
}

}  // namespace math
}  // namespace sg
