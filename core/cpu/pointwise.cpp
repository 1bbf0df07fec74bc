// CPU pointwise kernels: every one is a strided loop (core/cpu/loops.h) around the shared
// per-element math (core/pointwise_math.h). 16-bit floats are widened to float per element.
#include <algorithm>
#include <limits>
#include <optional>

#include "core/convert_math.h"
#include "core/cpu/operands.h"
#include "core/cpu/pointwise_kernels.h"

namespace sg::cpu {

namespace {
// Note [Tiled transposing copy]
// contiguous() of a transposed tensor reads the source with a large stride along the output's
// innermost dim: every element read touches a new cache line (~25x slower than a plain copy
// for a 4096x4096 f32). When the source is unit-stride along some other dim d, the copy walks
// (d, last) in 32x32 tiles instead, so both sides stay in cache while a tile is copied.
constexpr int64_t kTile = 32;

// The dim along which `src` is unit-stride while `dst` is unit-stride along the last dim, if any.
std::optional<int64_t> transposed_dim(const Shape& shape, const Operands<2>& ops, int64_t out_size, int64_t in_size) {
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  if (last < 1 || ops.byte_strides[0][last] != out_size || ops.byte_strides[1][last] == in_size) return std::nullopt;
  for (int64_t d = last - 1; d >= 0; --d)
    if (ops.byte_strides[1][d] == in_size && shape[d] >= kTile && shape[last] >= kTile) return d;
  return std::nullopt;
}

template <typename out_t, typename in_t>
void copy_tiled(const Shape& shape, const Operands<2>& ops, int64_t d) {
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  const int64_t rows = shape[d], cols = shape[last];
  const int64_t dst_row = ops.byte_strides[0][d], dst_col = ops.byte_strides[0][last];
  const int64_t src_row = ops.byte_strides[1][d], src_col = ops.byte_strides[1][last];
  // The remaining dims index whole (rows x cols) matrices.
  Operands<2> outer;
  outer.data = ops.data;
  Shape outer_shape;
  for (int64_t k = 0; k < last; ++k) {
    if (k == d) continue;
    outer_shape.push_back(shape[k]);
    for (int i = 0; i < 2; ++i) outer.byte_strides[i].push_back(ops.byte_strides[i][k]);
  }
  for_each_run<2>(outer_shape, outer, [&](auto p, auto s, int64_t n) {
    for (int64_t m = 0; m < n; ++m) {
      char* dst = p[0] + m * s[0];
      const char* src = p[1] + m * s[1];
      for (int64_t r0 = 0; r0 < rows; r0 += kTile)
        for (int64_t c0 = 0; c0 < cols; c0 += kTile)
          for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
            for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
              *reinterpret_cast<out_t*>(dst + r * dst_row + c * dst_col) =
                  convert<out_t, in_t>(*reinterpret_cast<const in_t*>(src + r * src_row + c * src_col));
    }
  });
}
}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  auto ops = make_operands<2>(dst.sizes(), {&dst, &src});
  Shape shape = dst.sizes();
  coalesce<2>(shape, ops);
  SG_DISPATCH_ALL(dst.dtype(), "copy", [&]<typename out_t>() {
    SG_DISPATCH_ALL(src.dtype(), "copy", [&]<typename in_t>() {
      if (auto d = transposed_dim(shape, ops, sizeof(out_t), sizeof(in_t))) {
        (copy_tiled<out_t, in_t>)(shape, ops, *d);  // parenthesised: a macro argument
        return;
      }
      for_each_run<2>(shape, ops, [](auto p, auto s, int64_t n) {
        unary_run<out_t, in_t>(p, s, n, [](in_t x) { return convert<out_t, in_t>(x); });
      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  Tensor scalar_src = Tensor(std::make_shared<TensorImpl>(
      std::make_shared<Storage>(&value, sizeof(double), Device::cpu(), nullptr), 0, Shape{}, Shape{}, DType::f64));
  copy(dst, scalar_src);
}

namespace {
// A switch per element would stop vectorisation, so each op gets its own instantiated loop.
template <UnaryOp Op, typename scalar_t>
void unary_typed(const Tensor& out, const Operands<2>& ops) {
  using math_t = opmath_t<scalar_t>;
  for_each_run<2>(out.sizes(), ops, [](auto p, auto s, int64_t n) {
    unary_run<scalar_t, scalar_t>(p, s, n, [](scalar_t x) { return scalar_t(math::unary<math_t>(Op, math_t(x))); });
  });
}

template <typename scalar_t>
void unary_dispatch(UnaryOp op, const Tensor& out, const Operands<2>& ops) {
  switch (op) {
// clang-format off
#define SG_UNARY_CASE(name) case UnaryOp::name: return unary_typed<UnaryOp::name, scalar_t>(out, ops);
    SG_UNARY_CASE(neg) SG_UNARY_CASE(exp) SG_UNARY_CASE(log) SG_UNARY_CASE(sqrt) SG_UNARY_CASE(rsqrt)
    SG_UNARY_CASE(abs) SG_UNARY_CASE(sign) SG_UNARY_CASE(tanh) SG_UNARY_CASE(sigmoid) SG_UNARY_CASE(relu)
    SG_UNARY_CASE(gelu_erf) SG_UNARY_CASE(gelu_tanh)
#undef SG_UNARY_CASE
    // clang-format on
  }
}
}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  auto ops = make_operands<2>(out.sizes(), {&out, &in});
  SG_DISPATCH_NUMERIC(in.dtype(), "unary", [&]<typename scalar_t>() { unary_dispatch<scalar_t>(op, out, ops); });
}

namespace {
template <typename Out, typename In, typename F>
void run_binary(const Tensor& out, Operands<3> ops, F f) {
  for_each_run<3>(out.sizes(), ops, [&](auto p, auto s, int64_t n) { binary_run<Out, In>(p, s, n, f); });
}

template <BinaryOp Op, typename scalar_t>
void binary_typed(const Tensor& out, const Operands<3>& ops, double alpha) {
  using math_t = opmath_t<scalar_t>;
  const math_t a_ = static_cast<math_t>(alpha);
  if constexpr (Op >= BinaryOp::eq && Op <= BinaryOp::ge) {
    run_binary<bool, scalar_t>(out, ops, [](scalar_t a, scalar_t b) {
      return math::binary<math_t>(Op, math_t(a), math_t(b), math_t(1)) != math_t(0);
    });
  } else {
    run_binary<scalar_t, scalar_t>(out, ops, [a_](scalar_t a, scalar_t b) {
      return scalar_t(math::binary<math_t>(Op, math_t(a), math_t(b), a_));
    });
  }
}

template <typename scalar_t>
void binary_dispatch(BinaryOp op, const Tensor& out, const Operands<3>& ops, double alpha) {
  switch (op) {
// clang-format off
#define SG_BINARY_CASE(name) case BinaryOp::name: return binary_typed<BinaryOp::name, scalar_t>(out, ops, alpha);
    SG_BINARY_CASE(add) SG_BINARY_CASE(sub) SG_BINARY_CASE(mul) SG_BINARY_CASE(div)
    SG_BINARY_CASE(pow) SG_BINARY_CASE(maximum) SG_BINARY_CASE(minimum) SG_BINARY_CASE(eq)
    SG_BINARY_CASE(ne) SG_BINARY_CASE(lt) SG_BINARY_CASE(le) SG_BINARY_CASE(gt) SG_BINARY_CASE(ge)
    SG_BINARY_CASE(relu_backward) SG_BINARY_CASE(gelu_erf_backward) SG_BINARY_CASE(gelu_tanh_backward)
#undef SG_BINARY_CASE
    // clang-format on
  }
}
}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  auto ops = make_operands<3>(out.sizes(), {&out, &a, &b});
  if (is_comparison(op) && a.dtype() == DType::boolean) {
    binary_dispatch<uint8_t>(op, out, ops, alpha);  // bools compare as bytes
    return;
  }
  SG_DISPATCH_NUMERIC(a.dtype(), "binary",
                      [&]<typename scalar_t>() { binary_dispatch<scalar_t>(op, out, ops, alpha); });
}

void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max) {
  auto ops = make_operands<2>(out.sizes(), {&out, &in});
  SG_DISPATCH_NUMERIC(in.dtype(), "clamp", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const math_t lo = min ? math_t(*min) : std::numeric_limits<math_t>::lowest();
    const math_t hi = max ? math_t(*max) : std::numeric_limits<math_t>::max();
    for_each_run<2>(out.sizes(), ops, [&](auto p, auto s, int64_t n) {
      unary_run<scalar_t, scalar_t>(p, s, n, [&](scalar_t x) {
        const math_t v = math_t(x);
        if (v != v) return x;  // NaN stays NaN, as in PyTorch
        const math_t at_least_lo = v < lo ? lo : v;
        // min(max(v, lo), hi): max wins if lo > hi, as in PyTorch
        return scalar_t(at_least_lo > hi ? hi : at_least_lo);
      });
    });
  });
}

void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  auto ops = make_operands<4>(out.sizes(), {&out, &condition, &a, &b});
  SG_DISPATCH_ALL(out.dtype(), "where", [&]<typename scalar_t>() {
    for_each_run<4>(out.sizes(), ops, [](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
        *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) =
            *reinterpret_cast<const scalar_t*>(p[c ? 2 : 3] + i * s[c ? 2 : 3]);
      }
    });
  });
}

}  // namespace sg::cpu
