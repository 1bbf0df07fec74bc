// Differentiable pointwise ops. Each front checks and promotes, runs a kernel from
// core/kernels/pointwise.h, and records its backward right below the forward.
#include "autograd/ops_pointwise.h"

#include <cmath>

#include "autograd/autocast_policy.h"
#include "autograd/function.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg {

using autograd::autocast;
using autograd::AutocastOp;
using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;
using autograd::sum_to;

namespace {

void check_same_device(const Tensor& a, const Tensor& b, const char* op_name) {
  SG_CHECK(a.device() == b.device(), op_name, ": tensors are on different devices (", a.device(), " and ", b.device(),
           ")");
}

// `t` in `dtype`, without recording history (the caller's node covers the conversion).
Tensor converted(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = empty(t.sizes(), {dtype, t.device()});
  kernels::copy(out, t);
  return out;
}

// What a backward needs to know of an input it does not otherwise save.
struct InputInfo {
  Shape shape;
  DType dtype;
  explicit InputInfo(const Tensor& t) : shape(t.sizes()), dtype(t.dtype()) {}
};

// A gradient reduced to an input's shape and dtype (broadcasting and promotion undone).
Tensor grad_for(const Tensor& grad, const InputInfo& input) {
  return converted(sum_to(grad, input.shape), input.dtype);
}
Tensor grad_for(const Tensor& grad, const Tensor& input) { return grad_for(grad, InputInfo(input)); }

Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, DType compute_dtype, const char* op_name,
                      double alpha = 1.0) {
  check_same_device(a, b, op_name);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op_name);
  const DType out_dtype = is_comparison(op) ? DType::boolean : compute_dtype;
  Tensor out = empty(shape, {out_dtype, a.device()});
  kernels::binary(op, out, converted(a, compute_dtype), converted(b, compute_dtype), alpha);
  return out;
}

Tensor unary_forward(UnaryOp op, const Tensor& x, const char* op_name, bool floating_only = true) {
  SG_CHECK(!floating_only || is_floating(x.dtype()), op_name, ": expected a floating tensor, got ", x.dtype());
  Tensor out = empty_like(x);
  kernels::unary(op, out, x);
  return out;
}

DType arithmetic_dtype(const Tensor& a, const Tensor& b) { return promote_types(a.dtype(), b.dtype()); }

}  // namespace

Tensor scalar_like(const Tensor& t, double value) {
  DType dtype = t.dtype();
  if (!is_floating(dtype) && (value != std::floor(value) || dtype == DType::boolean)) dtype = DType::f32;
  return full({}, value, {dtype, t.device()});
}

// ---- arithmetic ----

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = binary_forward(BinaryOp::add, a, b, arithmetic_dtype(a, b), "add", alpha);
  // d(a + alpha b)/da = 1, d/db = alpha
  return record("AddBackward", out, {a, b},
                [a = InputInfo(a), b = InputInfo(b), alpha](const Tensor& g, const NeedsGrad& needs) {
                  return TensorList{needs[0] ? grad_for(g, a) : Tensor(),
                                    needs[1] ? grad_for(alpha == 1 ? g : g * alpha, b) : Tensor()};
                });
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) { return add(a, b, -alpha); }

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::mul, a, b, arithmetic_dtype(a, b), "mul");
  // d(ab)/da = b, d(ab)/db = a
  // Backward lambdas read a saved tensor only for a gradient that is needed, so modifying an
  // operand in place is an error only when its value is really used (x * 2, then x.add_(1), is fine).
  return record("MulBackward", out, {a, b},
                [sa = SavedTensor(a), sb = SavedTensor(b), a = InputInfo(a), b = InputInfo(b)](const Tensor& g,
                                                                                               const NeedsGrad& needs) {
                  return TensorList{needs[0] ? grad_for(g * sb.get(), a) : Tensor(),
                                    needs[1] ? grad_for(g * sa.get(), b) : Tensor()};
                });
}

Tensor div(const Tensor& a, const Tensor& b) {
  DType dtype = arithmetic_dtype(a, b);
  if (!is_floating(dtype)) dtype = DType::f32;  // true division, as torch.div
  Tensor out = binary_forward(BinaryOp::div, a, b, dtype, "div");
  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b
  return record(
      "DivBackward", out, {a, b},
      [a = InputInfo(a), sb = SavedTensor(b), so = SavedTensor(out)](const Tensor& g, const NeedsGrad& needs) {
        const Tensor b = sb.get();
        const Tensor grad_a = needs[0] ? grad_for(g / b, a) : Tensor();
        const Tensor grad_b = needs[1] ? grad_for(-(g * so.get()) / b, b) : Tensor();
        return TensorList{grad_a, grad_b};
      });
}

Tensor pow(const Tensor& base, const Tensor& exponent) {
  if (const auto cast = autocast(AutocastOp::pow, base, exponent)) return pow((*cast)[0], (*cast)[1]);
  DType dtype = arithmetic_dtype(base, exponent);
  Tensor out = binary_forward(BinaryOp::pow, base, exponent, dtype, "pow");
  // d(a^b)/da = b a^(b-1);  d(a^b)/db = a^b log(a), taken as 0 where a == 0 (PyTorch's convention)
  return record("PowBackward", out, {base, exponent},
                [sa = SavedTensor(base), sb = SavedTensor(exponent), so = SavedTensor(out),
                 b_info = InputInfo(exponent)](const Tensor& g, const NeedsGrad& needs) {
                  const Tensor a = sa.get();
                  Tensor grad_a, grad_b;
                  if (needs[0]) {
                    const Tensor b = sb.get();
                    grad_a = grad_for(g * b * pow(a, b - 1.0), a);
                  }
                  if (needs[1]) grad_b = grad_for(where(eq(a, 0.0), 0.0 * g, g * so.get() * log(a)), b_info);
                  return TensorList{grad_a, grad_b};
                });
}

namespace {
// maximum / minimum: the gradient goes to the input that won (a wins where a_wins(a, b) holds);
// ties split it evenly, as PyTorch does.
Tensor extremum(BinaryOp op, const Tensor& a, const Tensor& b, const char* name, const char* node_name,
                Tensor (*a_wins)(const Tensor&, const Tensor&)) {
  Tensor out = binary_forward(op, a, b, arithmetic_dtype(a, b), name);
  return record(
      node_name, out, {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b), a_wins](const Tensor& g, const NeedsGrad&) {
        const Tensor a = sa.get(), b = sb.get();
        const Tensor share_a = where(a_wins(a, b), scalar_like(g, 1.0), where(eq(a, b), scalar_like(g, 0.5), 0.0));
        return TensorList{grad_for(g * share_a, a), grad_for(g * (1.0 - share_a), b)};
      });
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::maximum, a, b, "maximum", "MaximumBackward",
                  [](const Tensor& x, const Tensor& y) { return gt(x, y); });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::minimum, a, b, "minimum", "MinimumBackward",
                  [](const Tensor& x, const Tensor& y) { return lt(x, y); });
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor pow(const Tensor& base, double exponent) {
  if (const auto cast = autocast(AutocastOp::pow, base)) return pow((*cast)[0], exponent);
  const Tensor exponent_tensor = scalar_like(base, exponent);  // an integer tensor to a fractional power is f32
  Tensor out = binary_forward(BinaryOp::pow, base, exponent_tensor, arithmetic_dtype(base, exponent_tensor), "pow");
  // d(x^e)/dx = e x^(e-1)
  return record("PowScalarBackward", out, {base},
                [sb = SavedTensor(base), exponent](const Tensor& g, const NeedsGrad&) {
                  if (exponent == 0.0) return TensorList{zeros_like(g)};
                  return TensorList{g * pow(sb.get(), exponent - 1.0) * exponent};
                });
}
Tensor pow(double base, const Tensor& exponent) { return pow(scalar_like(exponent, base), exponent); }

// ---- unary ----

Tensor neg(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::neg, x, "neg", false);
  return record("NegBackward", out, {x}, [](const Tensor& g, const NeedsGrad&) { return TensorList{-g}; });
}

Tensor exp(const Tensor& x) {
  if (const auto cast = autocast(AutocastOp::exp, x)) return exp((*cast)[0]);
  Tensor out = unary_forward(UnaryOp::exp, x, "exp");
  // d/dx e^x = e^x
  return record("ExpBackward", out, {x},
                [so = SavedTensor(out)](const Tensor& g, const NeedsGrad&) { return TensorList{g * so.get()}; });
}

Tensor log(const Tensor& x) {
  if (const auto cast = autocast(AutocastOp::log, x)) return log((*cast)[0]);
  Tensor out = unary_forward(UnaryOp::log, x, "log");
  // d/dx log x = 1/x
  return record("LogBackward", out, {x},
                [sx = SavedTensor(x)](const Tensor& g, const NeedsGrad&) { return TensorList{g / sx.get()}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::sqrt, x, "sqrt");
  // d/dx sqrt x = 1 / (2 sqrt x)
  return record("SqrtBackward", out, {x}, [so = SavedTensor(out)](const Tensor& g, const NeedsGrad&) {
    return TensorList{g / (so.get() * 2.0)};
  });
}

Tensor rsqrt(const Tensor& x) {
  if (const auto cast = autocast(AutocastOp::rsqrt, x)) return rsqrt((*cast)[0]);
  Tensor out = unary_forward(UnaryOp::rsqrt, x, "rsqrt");
  // d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 out^3
  return record("RsqrtBackward", out, {x}, [so = SavedTensor(out)](const Tensor& g, const NeedsGrad&) {
    const Tensor y = so.get();
    return TensorList{g * y * y * y * -0.5};
  });
}

Tensor sign(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::sign, x, "sign", false);
  return record("SignBackward", out, {x}, [](const Tensor& g, const NeedsGrad&) { return TensorList{zeros_like(g)}; });
}

Tensor abs(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::abs, x, "abs", false);
  // d/dx |x| = sign(x) (0 at 0)
  return record("AbsBackward", out, {x},
                [sx = SavedTensor(x)](const Tensor& g, const NeedsGrad&) { return TensorList{g * sign(sx.get())}; });
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::tanh, x, "tanh");
  // d/dx tanh x = 1 - tanh^2 x
  return record("TanhBackward", out, {x}, [so = SavedTensor(out)](const Tensor& g, const NeedsGrad&) {
    const Tensor y = so.get();
    return TensorList{g * (1.0 - y * y)};
  });
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::sigmoid, x, "sigmoid");
  // d/dx s(x) = s(x) (1 - s(x))
  return record("SigmoidBackward", out, {x}, [so = SavedTensor(out)](const Tensor& g, const NeedsGrad&) {
    const Tensor y = so.get();
    return TensorList{g * y * (1.0 - y)};
  });
}

namespace {

// d/dx max(x, 0) = 1 where the output is positive: the backward of relu and relu_ needs only the output.
autograd::BackwardFn relu_backward_from(const Tensor& out) {
  return [so = SavedTensor(out)](const Tensor& g, const NeedsGrad&) {
    Tensor grad = empty_like(g);
    kernels::binary(BinaryOp::relu_backward, grad, g, so.get());
    return TensorList{grad};
  };
}

}  // namespace

Tensor relu(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::relu, x, "relu", false);
  return record("ReluBackward", out, {x}, relu_backward_from(out));
}

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  Tensor out = unary_forward(tanh_approximation ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf, x, "gelu");
  // derivative written out in core/pointwise_math.h (gelu_*_backward)
  return record("GeluBackward", out, {x}, [sx = SavedTensor(x), tanh_approximation](const Tensor& g, const NeedsGrad&) {
    Tensor grad = empty_like(g);
    kernels::binary(tanh_approximation ? BinaryOp::gelu_tanh_backward : BinaryOp::gelu_erf_backward, grad, g, sx.get());
    return TensorList{grad};
  });
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  Tensor out = empty_like(x);
  kernels::clamp(out, x, min, max);
  // The gradient passes where x lies inside [min, max].
  return record("ClampBackward", out, {x}, [sx = SavedTensor(x), min, max](const Tensor& g, const NeedsGrad&) {
    const Tensor x = sx.get();
    Tensor inside = ones_like(x).to(DType::boolean);
    if (min) inside = where(lt(x, *min), zeros_like(inside), inside);
    if (max) inside = where(gt(x, *max), zeros_like(inside), inside);
    return TensorList{where(inside, g, 0.0)};
  });
}

// ---- selection ----

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  SG_CHECK(condition.dtype() == DType::boolean, "where: condition must be bool, got ", condition.dtype());
  check_same_device(condition, a, "where");
  check_same_device(a, b, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(condition.sizes(), a.sizes(), "where"), b.sizes(), "where");
  const DType dtype = arithmetic_dtype(a, b);
  Tensor out = empty(shape, {dtype, a.device()});
  kernels::where(out, condition, converted(a, dtype), converted(b, dtype));
  // d/da = 1 where the condition holds, d/db = 1 elsewhere
  return record(
      "WhereBackward", out, {a, b},
      [sc = SavedTensor(condition), a = InputInfo(a), b = InputInfo(b)](const Tensor& g, const NeedsGrad& needs) {
        const Tensor condition = sc.get();
        const Tensor zero = scalar_like(g, 0.0);
        return TensorList{needs[0] ? grad_for(where(condition, g, zero), a) : Tensor(),
                          needs[1] ? grad_for(where(condition, zero, g), b) : Tensor()};
      });
}

Tensor where(const Tensor& condition, const Tensor& a, double b) { return where(condition, a, scalar_like(a, b)); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  SG_CHECK(broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill") == x.sizes(), "masked_fill: mask of shape ",
           shape_str(mask.sizes()), " does not broadcast to the tensor's shape ", shape_str(x.sizes()));
  return where(mask, full({}, value, {x.dtype(), x.device()}), x);  // the value takes x's dtype, as in PyTorch
}

// ---- comparisons ----

#define SG_COMPARISON(name)                                                     \
  Tensor name(const Tensor& a, const Tensor& b) {                               \
    return binary_forward(BinaryOp::name, a, b, arithmetic_dtype(a, b), #name); \
  }                                                                             \
  Tensor name(const Tensor& a, double b) { return name(a, scalar_like(a, b)); }
SG_COMPARISON(eq)
SG_COMPARISON(ne)
SG_COMPARISON(lt)
SG_COMPARISON(le)
SG_COMPARISON(gt)
SG_COMPARISON(ge)
#undef SG_COMPARISON

// ---- in-place methods (see Note [In-place ops and autograd]) ----

namespace {
int dtype_category(DType dtype) { return dtype == DType::boolean ? 0 : is_floating(dtype) ? 2 : 1; }

// Without autograd, a binary op writes straight into self (each element reads only its own
// position, so out may alias a); with autograd it goes through apply_in_place.
Tensor& binary_in_place(Tensor& self, const Tensor& other, BinaryOp op, double alpha,
                        Tensor (*out_of_place)(const Tensor&, const Tensor&, double), const char* op_name) {
  // As PyTorch's can_cast: a float result is not truncated into an integer tensor, nor an
  // integer one into a bool tensor; within a category (f32 into f16) it is rounded.
  const DType result_dtype = arithmetic_dtype(self, other);
  SG_CHECK(dtype_category(result_dtype) <= dtype_category(self.dtype()), op_name, ": the result type ", result_dtype,
           " cannot be written in place into a ", self.dtype(), " tensor");
  if (!autograd::any_requires_grad({self, other})) {
    SG_CHECK(broadcast_shapes(self.sizes(), other.sizes(), op_name) == self.sizes(), op_name, ": the result of shape ",
             shape_str(broadcast_shapes(self.sizes(), other.sizes(), op_name)),
             " cannot be written in place into a tensor of shape ", shape_str(self.sizes()));
    check_same_device(self, other, op_name);
    kernels::binary(op, self, self, converted(other, self.dtype()), alpha);
    self.storage()->bump_version();
    return self;
  }
  // x.mul_(x): the second operand is x's old value too, not x after the write.
  return autograd::apply_in_place(
      self, [&](const Tensor& s) { return out_of_place(s, other.is_same(self) ? s : other, alpha); }, {other}, op_name);
}
Tensor add_alpha(const Tensor& a, const Tensor& b, double alpha) { return add(a, b, alpha); }
Tensor mul_ignoring_alpha(const Tensor& a, const Tensor& b, double) { return mul(a, b); }
Tensor div_ignoring_alpha(const Tensor& a, const Tensor& b, double) { return div(a, b); }
}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return binary_in_place(*this, other, BinaryOp::add, alpha, add_alpha, "add_");
}
Tensor& Tensor::add_(double other) { return add_(scalar_like(*this, other)); }
Tensor& Tensor::sub_(const Tensor& other, double alpha) { return add_(other, -alpha); }
Tensor& Tensor::mul_(const Tensor& other) {
  return binary_in_place(*this, other, BinaryOp::mul, 1.0, mul_ignoring_alpha, "mul_");
}
Tensor& Tensor::mul_(double other) { return mul_(scalar_like(*this, other)); }
Tensor& Tensor::div_(const Tensor& other) {
  SG_CHECK(is_floating(dtype()), "div_: true division cannot be written in place into a ", dtype(), " tensor");
  return binary_in_place(*this, other, BinaryOp::div, 1.0, div_ignoring_alpha, "div_");
}
Tensor& Tensor::div_(double other) { return div_(scalar_like(*this, other)); }

Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) {
  return autograd::apply_in_place(
      *this, [&](const Tensor& s) { return sg::clamp(s, min, max); }, {}, "clamp_");
}
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return autograd::apply_in_place(
      *this, [&](const Tensor& s) { return sg::masked_fill(s, mask, value); }, {mask}, "masked_fill_");
}
Tensor& Tensor::relu_() {
  // No copy of the old value (Note [In place without a copy] in autograd/function.h).
  return autograd::apply_in_place_keeping_output(
      *this, [](const Tensor& s) { kernels::unary(UnaryOp::relu, s, s); }, "ReluBackward", relu_backward_from, "relu_");
}
Tensor& Tensor::fill_(double value) {
  if (!autograd::any_requires_grad({*this})) {
    kernels::fill(*this, value);
    storage()->bump_version();
    return *this;
  }
  return autograd::apply_in_place(
      *this,
      [&](const Tensor& s) {
        // A constant: no gradient flows to the old value.
        return autograd::record("FillBackward", full_like(s, value), {s},
                                [](const Tensor& g, const NeedsGrad&) { return TensorList{zeros_like(g)}; });
      },
      {}, "fill_");
}
Tensor& Tensor::zero_() { return fill_(0.0); }

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

Tensor Tensor::add(const Tensor& other, double alpha) const { return sg::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, double alpha) const { return sg::sub(*this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return sg::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return sg::div(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return sg::pow(*this, exponent); }
Tensor Tensor::pow(double exponent) const { return sg::pow(*this, exponent); }
Tensor Tensor::neg() const { return sg::neg(*this); }
Tensor Tensor::exp() const { return sg::exp(*this); }
Tensor Tensor::log() const { return sg::log(*this); }
Tensor Tensor::sqrt() const { return sg::sqrt(*this); }
Tensor Tensor::rsqrt() const { return sg::rsqrt(*this); }
Tensor Tensor::abs() const { return sg::abs(*this); }
Tensor Tensor::tanh() const { return sg::tanh(*this); }
Tensor Tensor::sigmoid() const { return sg::sigmoid(*this); }
Tensor Tensor::relu() const { return sg::relu(*this); }
Tensor Tensor::gelu(bool tanh_approximation) const { return sg::gelu(*this, tanh_approximation); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const { return sg::clamp(*this, min, max); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return sg::masked_fill(*this, mask, value); }
Tensor Tensor::eq(const Tensor& other) const { return sg::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return sg::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return sg::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return sg::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return sg::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return sg::ge(*this, other); }

}  // namespace sg
