#pragma once
// defines: the differentiable pointwise ops (NumPy broadcasting, dtype promotion).
//
// Binary ops promote their operands to a common dtype (promote_types); a double scalar
// operand takes the tensor's dtype when the tensor is floating (as in PyTorch, `x_f16 * 0.5`
// stays f16). Shapes that cannot broadcast throw naming the op and both shapes.
#include <optional>

#include "core/tensor.h"

namespace sg {

Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give f32
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& base, double exponent);
Tensor pow(double base, const Tensor& exponent);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // not differentiable (zero gradient, as in PyTorch)
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

// Elements of a where condition is true, else of b; condition is bool, all three broadcast.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, double b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// Comparisons give bool tensors and are not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// The tensor's dtype for a floating tensor, else f32 when `value` is fractional, else the
// tensor's integer dtype. Used to turn a double operand into a 0-dim tensor.
Tensor scalar_like(const Tensor& t, double value);

}  // namespace sg
