// Differentiable reductions and the softmax family; each forward is followed by its backward.
#include "autograd/ops_reduce.h"

#include <algorithm>
#include <cmath>

#include "autograd/autocast_policy.h"
#include "autograd/function.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax.h"

namespace sg {

using autograd::autocast;
using autograd::AutocastOp;
using autograd::BackwardFn;
using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Sorted, unique, wrapped dims; empty means all dims. A 0-dim tensor has nothing to reduce
// over (dim 0 and -1 are accepted, as PyTorch does), so it gets no dims.
Shape normalize_dims(const Tensor& x, const Shape& dims, const char* op_name) {
  Shape result;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) result.push_back(d);
    return result;
  }
  for (int64_t d : dims) result.push_back(wrap_dim(d, x.dim(), op_name));
  std::sort(result.begin(), result.end());
  SG_CHECK(std::adjacent_find(result.begin(), result.end()) == result.end(), op_name, ": dim repeated in ",
           shape_str(dims));
  if (x.dim() == 0) result.clear();
  return result;
}

// The output shape of reducing `dims` (normalized) of `shape`.
Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape result;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) result.push_back(shape[d]);
    else if (keepdim) result.push_back(1);
  }
  return result;
}

// How many input elements go into each output element.
int64_t reduced_count(const Shape& shape, const Shape& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= shape[d];
  return count;
}

// A reduced tensor (a gradient or a result) broadcast back over the input's shape.
// (Reshaping to the keepdim shape works whether or not the output kept its dims.)
Tensor broadcast_back(const Tensor& reduced, const Shape& input_shape, const Shape& dims) {
  return expand(reshape(reduced, reduced_shape(input_shape, dims, true)), input_shape);
}

void check_floating(const Tensor& x, const char* op_name) {
  SG_CHECK(is_floating(x.dtype()), op_name, ": expected a floating tensor, got ", x.dtype(), " of shape ",
           shape_str(x.sizes()));
}

// Max, min and their indices have no value for zero elements, so an empty reduced dim is an error.
void check_nonempty(const Tensor& x, const Shape& dims, const char* op_name) {
  for (int64_t d : dims)
    SG_CHECK(x.size(d) != 0, op_name, ": cannot reduce dim ", d, " of size 0 (input shape ", shape_str(x.sizes()),
             "): the max/min of no elements is undefined");
}

// The gradient g of a reduction, shared evenly among the `selected` input elements of each
// reduced group and zero elsewhere (how PyTorch splits the gradient of tied maxima).
Tensor split_evenly(const Tensor& g, const Tensor& selected, const Shape& dims) {
  const Tensor share = to_dtype(selected, g.dtype());
  const Tensor count = sum(share, dims, /*keepdim=*/true);
  return share * (reshape(g, count.sizes()) / count);
}

Tensor extremum_over(Extremum which, const Tensor& x, const Shape& dims, bool keepdim, const char* op_name) {
  const Shape reduce_dims = normalize_dims(x, dims, op_name);
  check_nonempty(x, reduce_dims, op_name);
  Tensor out = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {x.dtype(), x.device()});
  kernels::extremum(which, out, Tensor(), x, reduce_dims);
  // d/dx max(x) = 1 at the elements equal to the max, split evenly among ties
  return record(which == Extremum::max ? "AmaxBackward" : "AminBackward", out, {x},
                [sx = SavedTensor(x), so = SavedTensor(out), reduce_dims](const Tensor& g, const NeedsGrad&) {
                  const Tensor x = sx.get();
                  const Tensor selected = eq(x, broadcast_back(so.get(), x.sizes(), reduce_dims));
                  return TensorList{split_evenly(g, selected, reduce_dims)};
                });
}

// g (one value per reduced group) placed where `indices` point along the one reduced dim,
// zero elsewhere.
Tensor place_at_indices(const Tensor& g, const Tensor& indices, const Shape& input_shape, const Shape& dims) {
  if (dims.empty()) return reshape(g, input_shape);  // a 0-dim input is its own max
  const int64_t dim = dims[0];
  Shape positions_shape(input_shape.size() - dim, 1);  // [size of dim, 1, ..., 1] broadcasts along dim
  positions_shape[0] = input_shape[dim];
  const Tensor positions =
      reshape(arange(static_cast<double>(input_shape[dim]), {DType::i64, g.device()}), positions_shape);
  const Tensor selected = eq(positions, reshape(indices, reduced_shape(input_shape, dims, true)));
  return where(selected, broadcast_back(g, input_shape, dims), 0.0);
}

std::pair<Tensor, Tensor> extremum_along(Extremum which, const Tensor& x, int64_t dim, bool keepdim,
                                         const char* op_name) {
  const Shape reduce_dims = normalize_dims(x, {dim}, op_name);
  check_nonempty(x, reduce_dims, op_name);
  const Shape shape = reduced_shape(x.sizes(), reduce_dims, keepdim);
  Tensor values = empty(shape, {x.dtype(), x.device()});
  const Tensor indices = empty(shape, {DType::i64, x.device()});
  kernels::extremum(which, values, indices, x, reduce_dims);
  // d/dx max(x, dim) = 1 at the index it returns (the first of tied maxima)
  values = record(which == Extremum::max ? "MaxBackward" : "MinBackward", values, {x},
                  [input_shape = x.sizes(), si = SavedTensor(indices), reduce_dims](const Tensor& g, const NeedsGrad&) {
                    return TensorList{place_at_indices(g, si.get(), input_shape, reduce_dims)};
                  });
  return {values, indices};
}

Tensor arg_extremum(Extremum which, const Tensor& x, std::optional<int64_t> dim, bool keepdim, const char* op_name) {
  const Shape reduce_dims = dim ? normalize_dims(x, {*dim}, op_name) : normalize_dims(x, {}, op_name);
  check_nonempty(x, reduce_dims, op_name);
  Tensor indices = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {DType::i64, x.device()});
  kernels::extremum(which, Tensor(), indices, x, reduce_dims);
  return indices;  // integer positions: not differentiable
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  if (const auto cast = autocast(AutocastOp::sum, x)) return sum((*cast)[0], dims, keepdim);
  const Shape reduce_dims = normalize_dims(x, dims, "sum");
  const DType dtype = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  Tensor out = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {dtype, x.device()});
  kernels::sum(out, x, reduce_dims);
  // d/dx sum(x) = 1 for every element: broadcast the gradient back
  return record("SumBackward", out, {x}, [input_shape = x.sizes(), reduce_dims](const Tensor& g, const NeedsGrad&) {
    return TensorList{broadcast_back(g, input_shape, reduce_dims)};
  });
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  if (const auto cast = autocast(AutocastOp::mean, x)) return mean((*cast)[0], dims, keepdim);
  SG_CHECK(is_floating(x.dtype()), "mean: expected a floating tensor, got ", x.dtype());
  const Shape reduce_dims = normalize_dims(x, dims, "mean");
  // mean = sum / count; the division records its own (trivial) backward
  return div(sum(x, reduce_dims, keepdim), static_cast<double>(reduced_count(x.sizes(), reduce_dims)));
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_over(Extremum::max, x, dims, keepdim, "amax");
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_over(Extremum::min, x, dims, keepdim, "amin");
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along(Extremum::max, x, dim, keepdim, "max");
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along(Extremum::min, x, dim, keepdim, "min");
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(Extremum::max, x, dim, keepdim, "argmax");
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extremum(Extremum::min, x, dim, keepdim, "argmin");
}

Tensor var(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  if (const auto cast = autocast(AutocastOp::var, x)) return var((*cast)[0], dims, unbiased, keepdim);
  check_floating(x, "var");
  const Shape reduce_dims = normalize_dims(x, dims, "var");
  const int64_t correction = unbiased ? 1 : 0;  // Bessel's correction
  Tensor out = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {x.dtype(), x.device()});
  kernels::var(out, x, reduce_dims, correction);
  // d/dx var(x) = 2 (x - mean(x)) / (n - correction)
  return record("VarBackward", out, {x},
                [sx = SavedTensor(x), reduce_dims, correction](const Tensor& g, const NeedsGrad&) {
                  const Tensor x = sx.get();
                  const double n = static_cast<double>(reduced_count(x.sizes(), reduce_dims));
                  const Tensor deviation = x - mean(x, reduce_dims, /*keepdim=*/true);
                  return TensorList{broadcast_back(g, x.sizes(), reduce_dims) * deviation * (2.0 / (n - correction))};
                });
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  if (const auto cast = autocast(AutocastOp::norm, x)) return norm((*cast)[0], p, dims, keepdim);
  check_floating(x, "norm");
  SG_CHECK(p > 0, "norm: p must be positive or inf, got ", p);
  const Shape reduce_dims = normalize_dims(x, dims, "norm");
  Tensor out = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {x.dtype(), x.device()});
  kernels::norm(out, x, reduce_dims, p);
  // d/dx |x|_p   = sign(x) |x|^(p-1) / |x|_p^(p-1), taken as 0 where x or the norm is 0 (as PyTorch)
  // d/dx |x|_inf = sign(x) at the largest |x|, split evenly among ties
  return record("NormBackward", out, {x},
                [sx = SavedTensor(x), so = SavedTensor(out), reduce_dims, p](const Tensor& g, const NeedsGrad&) {
                  const Tensor x = sx.get();
                  const Tensor norm_x = broadcast_back(so.get(), x.sizes(), reduce_dims);
                  if (std::isinf(p)) return TensorList{sign(x) * split_evenly(g, eq(abs(x), norm_x), reduce_dims)};
                  const Tensor scaled_x = where(ne(x, 0.0), sign(x) * pow(abs(x), p - 1.0), 0.0);
                  const Tensor scale =
                      where(ne(norm_x, 0.0), broadcast_back(g, x.sizes(), reduce_dims) / pow(norm_x, p - 1.0), 0.0);
                  return TensorList{scaled_x * scale};
                });
}

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  if (const auto cast = autocast(AutocastOp::logsumexp, x)) return logsumexp((*cast)[0], dims, keepdim);
  check_floating(x, "logsumexp");
  const Shape reduce_dims = normalize_dims(x, dims, "logsumexp");
  Tensor out = empty(reduced_shape(x.sizes(), reduce_dims, keepdim), {x.dtype(), x.device()});
  kernels::logsumexp(out, x, reduce_dims);
  // d/dx logsumexp(x) = exp(x - logsumexp(x)) = softmax(x)
  return record("LogsumexpBackward", out, {x},
                [sx = SavedTensor(x), so = SavedTensor(out), reduce_dims](const Tensor& g, const NeedsGrad&) {
                  const Tensor x = sx.get();
                  return TensorList{broadcast_back(g, x.sizes(), reduce_dims) *
                                    exp(x - broadcast_back(so.get(), x.sizes(), reduce_dims))};
                });
}

// ---- softmax family (fused kernels: core/kernels/softmax.h) ----

namespace {
// Runs the fused forward; returns the output and the wrapped dim.
std::pair<Tensor, int64_t> softmax_forward(SoftmaxKind kind, const Tensor& x, int64_t dim) {
  check_floating(x, softmax_name(kind));
  const int64_t wrapped = wrap_dim(dim, x.dim(), softmax_name(kind));
  Tensor out = empty(x.sizes(), {x.dtype(), x.device()});
  kernels::softmax(kind, out, x, wrapped);
  return {out, wrapped};
}

// The fused backward, from the saved output y.
BackwardFn softmax_backward(SoftmaxKind kind, const Tensor& out, int64_t dim) {
  return [kind, so = SavedTensor(out), dim](const Tensor& g, const NeedsGrad&) {
    const Tensor y = so.get();
    Tensor grad = empty(y.sizes(), {y.dtype(), y.device()});
    kernels::softmax_backward(kind, grad, to_dtype(g, y.dtype()), y, dim);
    return TensorList{grad};
  };
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  if (const auto cast = autocast(AutocastOp::softmax, x)) return softmax((*cast)[0], dim);
  const auto [out, wrapped] = softmax_forward(SoftmaxKind::softmax, x, dim);
  // d/dx softmax(x) = y * (g - sum(g * y)) along dim, y = softmax(x)
  return record("SoftmaxBackward", out, {x}, softmax_backward(SoftmaxKind::softmax, out, wrapped));
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (const auto cast = autocast(AutocastOp::log_softmax, x)) return log_softmax((*cast)[0], dim);
  const auto [out, wrapped] = softmax_forward(SoftmaxKind::log_softmax, x, dim);
  // d/dx log_softmax(x) = g - exp(y) * sum(g) along dim, y = log_softmax(x)
  return record("LogSoftmaxBackward", out, {x}, softmax_backward(SoftmaxKind::log_softmax, out, wrapped));
}

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return sg::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return sg::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return extremum_over(Extremum::max, *this, {}, false, "max"); }
Tensor Tensor::min() const { return extremum_over(Extremum::min, *this, {}, false, "min"); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return sg::max(*this, dim, keepdim); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return sg::min(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return sg::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return sg::argmin(*this, dim, keepdim); }
Tensor Tensor::var(const Shape& dims, bool unbiased, bool keepdim) const {
  return sg::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const { return sg::norm(*this, p, dims, keepdim); }
Tensor Tensor::softmax(int64_t dim) const { return sg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return sg::log_softmax(*this, dim); }
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const { return sg::logsumexp(*this, dims, keepdim); }

}  // namespace sg
