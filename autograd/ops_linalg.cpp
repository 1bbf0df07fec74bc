// Differentiable matrix products. Every product runs on the one GEMM kernel (core/kernels/gemm.h);
// the fronts check shapes, arrange the operands as views (1-D promotion, broadcast batch dims,
// folding) and record one node, whose backward is matmul_backward for all of them.
#include "autograd/ops_linalg.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/autocast_policy.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/gemm.h"
#include "core/kernels/pointwise.h"

namespace sg {

using autograd::autocast;
using autograd::AutocastOp;
using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;
using autograd::sum_to;

namespace {

std::string shapes_str(const Tensor& a, const Tensor& b) {
  return detail::concat(shape_str(a.sizes()), " and ", shape_str(b.sizes()));
}

void check_operands(const char* op_name, const Tensor& a, const Tensor& b) {
  SG_CHECK(a.device() == b.device(), op_name, ": operands of shapes ", shapes_str(a, b), " are on different devices (",
           a.device(), " and ", b.device(), ")");
  SG_CHECK(a.dtype() == b.dtype(), op_name, ": operands of shapes ", shapes_str(a, b), " have different dtypes (",
           a.dtype(), " and ", b.dtype(), ")");
  SG_CHECK(a.dtype() != DType::boolean, op_name, ": bool operands (shapes ", shapes_str(a, b), ") are not supported");
}

void check_rank(const char* op_name, const Tensor& a, const Tensor& b, int64_t rank) {
  SG_CHECK(a.dim() == rank && b.dim() == rank, op_name, ": expected ", rank, "-D operands, got shapes ",
           shapes_str(a, b));
}

// a's last dim meets b's rows (b's only dim when b is 1-D).
void check_inner_dims(const char* op_name, const Tensor& a, const Tensor& b) {
  const int64_t b_inner = b.dim() == 1 ? b.size(0) : b.size(-2);
  SG_CHECK(a.size(-1) == b_inner, op_name, ": shapes ", shapes_str(a, b), " cannot be multiplied (inner dims ",
           a.size(-1), " vs ", b_inner, ")");
}

Shape batch_shape(const Tensor& t) { return t.dim() > 2 ? Shape(t.sizes().begin(), t.sizes().end() - 2) : Shape{}; }

// The broadcast batch dims of a product, checked with a message that names both full shapes.
Shape product_batch(const char* op_name, const Tensor& a, const Tensor& b) {
  const Shape batch_a = batch_shape(a), batch_b = batch_shape(b);
  for (size_t i = 1; i <= std::min(batch_a.size(), batch_b.size()); ++i) {
    const int64_t size_a = batch_a[batch_a.size() - i], size_b = batch_b[batch_b.size() - i];
    SG_CHECK(size_a == size_b || size_a == 1 || size_b == 1, op_name, ": the batch dims of shapes ", shapes_str(a, b),
             " cannot be broadcast (", size_a, " vs ", size_b, ")");
  }
  return broadcast_shapes(batch_a, batch_b, op_name);
}

// t[..., c] as a matrix [(...), c] (a view when the layout allows, else a copy).
Tensor as_rows(const Tensor& t) {
  return t.reshape({numel_of(Shape(t.sizes().begin(), t.sizes().end() - 1)), t.size(-1)});
}

// Note [Folding batch dims into rows]
// a[..., m, k] @ b[k, n] multiplies every row of a by the same b, so when a's batch dims and rows
// are laid out as one dim the whole product is ONE GEMM with (... m) rows. One large GEMM is much
// faster than many small ones, and this is the product of a Linear layer on a [B, T, C] input.
// Folding is done only when it is a view: a copy of a would cost more than it saves.
std::optional<Tensor> folded_rows(const Tensor& a) {
  int64_t rows = 1, row_stride = a.stride(-2), outer_stride = -1;  // outer_stride: what the next dim must step
  for (int64_t d = a.dim() - 2; d >= 0; --d) {
    if (a.size(d) == 1) continue;
    if (outer_stride >= 0 && a.stride(d) != outer_stride) return std::nullopt;
    if (outer_stride < 0) row_stride = a.stride(d);
    outer_stride = a.stride(d) * a.size(d);
    rows *= a.size(d);
  }
  return as_strided(a.detach(), {rows, a.size(-1)}, {row_stride, a.stride(-1)}, a.storage_offset());
}

// alpha * a[..., m, k] @ b[..., k, n] for operands of rank >= 2 whose batch dims broadcast (shapes
// already checked); records no history.
Tensor product(const Tensor& a, const Tensor& b, double alpha = 1.0) {
  const Shape batch = broadcast_shapes(batch_shape(a), batch_shape(b), "matmul");
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {a.size(-2), b.size(-1)});
  Tensor out = empty(out_shape, {a.dtype(), a.device()});
  if (a.dim() > 2 && b.dim() == 2) {
    if (const auto rows = folded_rows(a)) {
      kernels::gemm(out.view({rows->size(0), b.size(-1)}), *rows, b.detach(), alpha);
      return out;
    }
  }
  Shape a_shape = batch, b_shape = batch;  // broadcast batch dims become stride-0 views: no copy
  a_shape.insert(a_shape.end(), {a.size(-2), a.size(-1)});
  b_shape.insert(b_shape.end(), {b.size(-2), b.size(-1)});
  kernels::gemm(out, a.detach().expand(a_shape), b.detach().expand(b_shape), alpha);
  return out;
}

// alpha a^T g, the gradient of a 2-D b (input `b_input` of the running node), in b's layout: a
// Linear multiplies by weight.t(), a transposed view, so its gradient is computed as
// (alpha g^T a)^T. The weight's gradient (the backward of .t()) is then contiguous, and becomes
// weight.grad without a transposing copy. Where b's gradient has a home (DDP's bucket slot), the
// GEMM writes straight into it (Note [A gradient written where it lands] in autograd/engine.cpp).
Tensor matrix_gradient(const Tensor& a_rows, const Tensor& g_rows, const Tensor& b, double alpha, size_t b_input) {
  const bool transposed = b.stride(0) == 1 && b.stride(1) != 1;
  const Tensor left = transposed ? g_rows.t() : a_rows.t(), right = transposed ? a_rows : g_rows;
  const Tensor home = autograd::gradient_home(b_input, b.sizes(), g_rows);
  const Tensor home_as_result = home.defined() ? (transposed ? home.t() : home) : Tensor();
  const Tensor result = home_as_result.defined() && home_as_result.is_contiguous()
                            ? home_as_result
                            : empty({left.size(0), right.size(1)}, {g_rows.dtype(), g_rows.device()});
  kernels::gemm(result, left, right, alpha);
  return transposed ? result.t() : result;
}

// d(alpha a @ b)/da = alpha g @ b^T and d(alpha a @ b)/db = alpha a^T @ g, matrix by matrix; each
// gradient is then summed over the batch dims that broadcasting added to its operand. A 1-D a took
// part as the row [1, k] and a 1-D b as the column [k, 1]; their gradients are that row / column.
TensorList matmul_backward(const Tensor& g, const Tensor& a, const Tensor& b, const NeedsGrad& needs, size_t b_input,
                           double alpha = 1.0) {
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Shape g_shape = g.sizes();  // the dims that matmul removed for 1-D operands, put back
  if (b.dim() == 1) g_shape.push_back(1);
  if (a.dim() == 1) g_shape.insert(g_shape.end() - 1, 1);
  const Tensor g2 = g.reshape(g_shape);
  Tensor grad_a, grad_b;
  if (needs[0]) grad_a = sum_to(product(g2, b2.transpose(-1, -2), alpha), a2.sizes()).reshape(a.sizes());
  if (needs[1]) {
    if (a2.dim() >= 2 && b.dim() == 2) {
      // The sum over the batch of a_i^T g_i is one GEMM over the folded rows (Note [Folding batch dims into rows]).
      grad_b = matrix_gradient(as_rows(a2), as_rows(g2), b, alpha, b_input);
    } else {
      grad_b = sum_to(product(a2.transpose(-1, -2), g2, alpha), b2.sizes()).reshape(b.sizes());
    }
  }
  return TensorList{grad_a, grad_b};
}

// matmul, mm and bmm share their backward: mm and bmm are matmul restricted to fixed ranks.
Tensor record_product(const char* name, Tensor out, const Tensor& a, const Tensor& b) {
  // d(a @ b)/da = g @ b^T, d(a @ b)/db = a^T @ g (batches and 1-D operands: matmul_backward)
  return record(name, std::move(out), {a, b},
                [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g, const NeedsGrad& needs) {
                  return matmul_backward(g, sa.get(), sb.get(), needs, /*b_input=*/1);
                });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (const auto cast = autocast(AutocastOp::matmul, a, b)) return matmul((*cast)[0], (*cast)[1]);
  check_operands("matmul", a, b);
  SG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least one dim, got shapes ", shapes_str(a, b));
  check_inner_dims("matmul", a, b);
  Shape out_shape = product_batch("matmul", a, b);
  if (a.dim() > 1) out_shape.push_back(a.size(-2));
  if (b.dim() > 1) out_shape.push_back(b.size(-1));
  // A 1-D a is multiplied as the row [1, k], a 1-D b as the column [k, 1]; the added dim is dropped.
  const Tensor a2 = a.dim() == 1 ? a.detach().unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.detach().unsqueeze(1) : b;
  return record_product("MatmulBackward", product(a2, b2).view(out_shape), a, b);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  if (const auto cast = autocast(AutocastOp::mm, a, b)) return mm((*cast)[0], (*cast)[1]);
  check_operands("mm", a, b);
  check_rank("mm", a, b, 2);
  check_inner_dims("mm", a, b);
  return record_product("MmBackward", product(a, b), a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (const auto cast = autocast(AutocastOp::bmm, a, b)) return bmm((*cast)[0], (*cast)[1]);
  check_operands("bmm", a, b);
  check_rank("bmm", a, b, 3);
  SG_CHECK(a.size(0) == b.size(0), "bmm: shapes ", shapes_str(a, b), " have different batch sizes (", a.size(0), " vs ",
           b.size(0), ")");
  check_inner_dims("bmm", a, b);
  return record_product("BmmBackward", product(a, b), a, b);
}

namespace {

// beta * input + alpha * (a @ b) for addmm (2-D) and baddbmm (3-D, batch by batch), once the
// operands' ranks are checked: one GEMM with beta, so f16/bf16 round once, as a GPU's does.
Tensor add_product(const char* op, const char* backward_name, const Tensor& input, const Tensor& a, const Tensor& b,
                   double beta, double alpha) {
  check_operands(op, input, a);
  check_inner_dims(op, a, b);
  Shape shape(a.sizes().begin(), a.sizes().end() - 1);
  shape.push_back(b.size(-1));
  SG_CHECK(broadcast_shapes(input.sizes(), shape, op) == shape, op, ": input of shape ", shape_str(input.sizes()),
           " cannot be broadcast to the product's shape ", shape_str(shape));
  SG_CHECK(is_floating(a.dtype()) || (beta == std::floor(beta) && alpha == std::floor(alpha)), op,
           ": beta and alpha must be whole numbers for ", a.dtype(), " operands, got ", beta, " and ", alpha);
  Tensor out = empty(shape, {a.dtype(), a.device()});
  const bool bias_row = input.dim() == 1 && input.size(0) == shape.back() && input.dtype() == out.dtype();
  if (beta == 1 && alpha == 1 && a.dim() == 2 && bias_row) {
    kernels::gemm_bias(out, a.detach(), b.detach(), input.detach());  // a Linear layer's bias: added by the GEMM
  } else {
    if (beta != 0) kernels::copy(out, input);  // beta == 0 ignores input entirely (NaN included), as BLAS
    kernels::gemm(out, a.detach(), b.detach(), alpha, beta);
  }
  // d/dinput = beta g (summed over input's broadcast dims); d/da and d/db as matmul's, times alpha
  return record(
      backward_name, out, {input, a, b},
      [input_shape = input.sizes(), sa = SavedTensor(a), sb = SavedTensor(b), beta, alpha](const Tensor& g,
                                                                                           const NeedsGrad& needs) {
        const TensorList products = matmul_backward(g, sa.get(), sb.get(), {needs[1], needs[2]}, /*b_input=*/2, alpha);
        const Tensor grad_input = needs[0] ? sum_to(beta == 1 ? g : g * beta, input_shape) : Tensor();
        return TensorList{grad_input, products[0], products[1]};
      });
}

}  // namespace

Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, double beta, double alpha) {
  if (const auto cast = autocast(AutocastOp::baddbmm, input, a, b))
    return baddbmm((*cast)[0], (*cast)[1], (*cast)[2], beta, alpha);
  check_operands("baddbmm", a, b);
  check_rank("baddbmm", a, b, 3);
  SG_CHECK(a.size(0) == b.size(0), "baddbmm: shapes ", shapes_str(a, b), " have different batch sizes (", a.size(0),
           " vs ", b.size(0), ")");
  return add_product("baddbmm", "BaddbmmBackward", input, a, b, beta, alpha);
}

Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, double beta, double alpha) {
  if (const auto cast = autocast(AutocastOp::addmm, input, a, b))
    return addmm((*cast)[0], (*cast)[1], (*cast)[2], beta, alpha);
  check_operands("addmm", a, b);
  check_rank("addmm", a, b, 2);
  return add_product("addmm", "AddmmBackward", input, a, b, beta, alpha);
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  // The weight is cast before it is transposed, so the cast is of the parameter itself and the
  // region's cache can keep it (Note [The autocast weight cache]).
  if (const auto cast = autocast(AutocastOp::linear, input, weight, bias))
    return linear((*cast)[0], (*cast)[1], (*cast)[2]);
  // A batch of vectors is one GEMM with the bias fused in (kernels::gemm_bias through addmm), so
  // no pass adds it afterwards. A contiguous [..., in] input is such a
  // batch as a view (Note [Folding batch dims into rows]); other inputs go through matmul.
  if (input.dim() == 2) return bias.defined() ? addmm(bias, input, weight.t()) : mm(input, weight.t());
  if (bias.defined() && input.dim() > 2 && input.is_contiguous()) {
    SG_CHECK(weight.dim() == 2 && input.size(-1) == weight.size(1), "linear: input of shape ", shape_str(input.sizes()),
             " does not fit weight of shape ", shape_str(weight.sizes()), " (expected [..., in] and [out, in])");
    Shape out_shape = input.sizes();
    out_shape.back() = weight.size(0);
    const int64_t rows = numel_of(Shape(out_shape.begin(), out_shape.end() - 1));
    return addmm(bias, input.reshape({rows, input.size(-1)}), weight.t()).view(out_shape);
  }
  const Tensor out = matmul(input, weight.t());
  return bias.defined() ? out + bias : out;
}

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

Tensor Tensor::matmul(const Tensor& other) const { return sg::matmul(*this, other); }

}  // namespace sg
