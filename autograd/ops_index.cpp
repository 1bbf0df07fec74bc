// Differentiable joining and indexing ops. Each front checks shapes and index values, runs a
// kernel from core/kernels/index.h (joining copies into views of its output), and records its
// backward right below the forward. split and chunk are narrow views, so autograd needs nothing.
#include "autograd/ops_index.h"

#include <algorithm>
#include <string>

#include "autograd/autocast_policy.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/index.h"
#include "core/kernels/pointwise.h"

namespace sg {

using autograd::NeedsGrad;
using autograd::record;
using autograd::SavedTensor;

namespace {

void check_same_device(const Tensor& a, const Tensor& b, const char* op_name) {
  SG_CHECK(a.device() == b.device(), op_name, ": tensors are on different devices (", a.device(), " and ", b.device(),
           ")");
}

void check_index_dtype(const Tensor& index, const char* op_name) {
  SG_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op_name,
           ": expected an i64 or i32 index tensor, got ", index.dtype());
}

// Every index value must lie in [0, size). Checked here, before any kernel starts its threads
// (a throw inside a parallel region would terminate the program). `what` names the size.
void check_index_range(const Tensor& index, int64_t size, const char* op_name, const std::string& what) {
  if (index.numel() == 0) return;
  const auto [lowest, highest] = kernels::index_range(index);
  SG_CHECK(lowest >= 0 && highest < size, op_name, ": index ", lowest < 0 ? lowest : highest,
           " is out of range for size ", size, " (", what, ")");
}

std::string dim_of(const Tensor& x, int64_t dim) {
  return detail::concat("dim ", dim, " of shape ", shape_str(x.sizes()));
}

// The dtype all of `tensors` promote to; they must share a device.
DType common_dtype(const TensorList& tensors, const char* op_name) {
  DType dtype = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    SG_CHECK(tensors[i].defined(), op_name, ": tensor ", i, " is undefined");
    check_same_device(tensors[0], tensors[i], op_name);
    dtype = promote_types(dtype, tensors[i].dtype());
  }
  return dtype;
}

std::vector<DType> dtypes_of(const TensorList& tensors) {
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors) dtypes.push_back(t.dtype());
  return dtypes;
}

std::vector<Shape> shapes_of(const TensorList& tensors) {
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) shapes.push_back(t.sizes());
  return shapes;
}

// gather and scatter treat a 0-dim tensor as a 1-element 1-D one, as PyTorch does.
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? reshape(t, {1}) : t; }

// `t` in the leading corner of a zero tensor of `shape`.
Tensor zero_padded(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  Tensor out = zeros(shape, {t.dtype(), t.device()});
  Tensor corner = out;
  for (int64_t d = 0; d < t.dim(); ++d) corner = narrow(corner, d, 0, t.size(d));
  kernels::copy(corner, t);
  return out;
}

}  // namespace

// ---- joining ----

Tensor cat(const TensorList& tensors, int64_t dim) {
  SG_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const DType dtype = common_dtype(tensors, "cat");
  // PyTorch's legacy rule: 1-D empty tensors are skipped, whatever the other shapes are.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  size_t reference = 0;  // the first tensor that is not skipped fixes the shape
  for (size_t i = 0; i < tensors.size(); ++i) {
    SG_CHECK(tensors[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    if (skipped(tensors[reference]) && !skipped(tensors[i])) reference = i;
  }
  const Tensor& first = tensors[reference];
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.sizes();
  shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t)) continue;
    bool matches = t.dim() == first.dim();
    for (int64_t d = 0; matches && d < t.dim(); ++d) matches = d == dim || t.size(d) == first.size(d);
    SG_CHECK(matches, "cat: shapes ", shape_str(first.sizes()), " (tensor ", reference, ") and ", shape_str(t.sizes()),
             " (tensor ", i, ") must match except in dim ", dim);
    shape[dim] += t.size(dim);
  }
  Tensor out = empty(shape, {dtype, first.device()});
  std::vector<int64_t> starts;  // where each input begins along dim
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    starts.push_back(start);
    if (skipped(t)) continue;
    kernels::copy(narrow(out, dim, start, t.size(dim)), t);
    start += t.size(dim);
  }
  // d cat / d input_i: the slice of the gradient that input i was copied to
  // (an empty input, skipped or not, simply gets an empty gradient of its own shape)
  return record(
      "CatBackward", out, tensors,
      [starts, dim, shapes = shapes_of(tensors), dtypes = dtypes_of(tensors)](const Tensor& g, const NeedsGrad& needs) {
        TensorList grads(shapes.size());
        for (size_t i = 0; i < shapes.size(); ++i) {
          if (!needs[i]) continue;
          grads[i] = numel_of(shapes[i]) == 0 ? zeros(shapes[i], {dtypes[i], g.device()})
                                              : to_dtype(narrow(g, dim, starts[i], shapes[i][dim]), dtypes[i]);
        }
        return grads;
      });
}

Tensor stack(const TensorList& tensors, int64_t dim) {
  SG_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  const DType dtype = common_dtype(tensors, "stack");
  const Shape& input_shape = tensors[0].sizes();
  for (size_t i = 1; i < tensors.size(); ++i)
    SG_CHECK(tensors[i].sizes() == input_shape, "stack: expects each tensor to be equal size, but got ",
             shape_str(input_shape), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  dim = wrap_dim(dim, static_cast<int64_t>(input_shape.size()) + 1, "stack");
  Shape shape = input_shape;
  shape.insert(shape.begin() + dim, static_cast<int64_t>(tensors.size()));
  Tensor out = empty(shape, {dtype, tensors[0].device()});
  for (size_t i = 0; i < tensors.size(); ++i) kernels::copy(select(out, dim, static_cast<int64_t>(i)), tensors[i]);
  // d stack / d input_i: the i-th slice of the gradient along the new dim
  return record("StackBackward", out, tensors,
                [dim, dtypes = dtypes_of(tensors)](const Tensor& g, const NeedsGrad& needs) {
                  TensorList grads(dtypes.size());
                  for (size_t i = 0; i < dtypes.size(); ++i)
                    if (needs[i]) grads[i] = to_dtype(select(g, dim, static_cast<int64_t>(i)), dtypes[i]);
                  return grads;
                });
}

// ---- splitting: views made by narrow, whose backward autograd already knows ----

TensorList split(const Tensor& x, int64_t split_size, int64_t dim) {
  SG_CHECK(x.dim() > 0, "split: expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.size(dim);
  SG_CHECK(split_size >= 0, "split: split_size must be non-negative, got ", split_size);
  SG_CHECK(split_size > 0 || size == 0, "split: split_size can only be 0 if the dimension size is 0, but ",
           dim_of(x, dim), " has size ", size);
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<int64_t> sizes(pieces, split_size);
  sizes.back() = size - split_size * (pieces - 1);  // the last piece takes what is left
  return split(x, sizes, dim);
}

TensorList split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  SG_CHECK(x.dim() > 0, "split: expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    SG_CHECK(s >= 0, "split: sizes must be non-negative, got ", shape_str(sizes));
    total += s;
  }
  SG_CHECK(total == x.size(dim), "split: sizes ", shape_str(sizes), " must sum exactly to ", x.size(dim), " (",
           dim_of(x, dim), ")");
  TensorList pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(narrow(x, dim, start, s));
    start += s;
  }
  return pieces;
}

TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  SG_CHECK(x.dim() > 0, "chunk: expects at least a 1-dimensional tensor");
  SG_CHECK(chunks > 0, "chunk: expects `chunks` to be greater than 0, got ", chunks);
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.size(dim);
  // Pieces of ceil(size / chunks), so there may be fewer than `chunks` (6 in 4 chunks: 2, 2, 2);
  // an empty dim still gives `chunks` empty pieces, as in PyTorch.
  if (size == 0) return split(x, std::vector<int64_t>(chunks, 0), dim);
  return split(x, (size + chunks - 1) / chunks, dim);
}

// ---- indexing ----

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype(index, "index_select");
  check_same_device(x, index, "index_select");
  SG_CHECK(index.dim() <= 1, "index_select: index must be 1-D or 0-dim, got shape ", shape_str(index.sizes()));
  dim = wrap_dim(dim, x.dim(), "index_select");
  if (x.dim() == 0) {  // a 0-dim x takes one index, 0, and stays 0-dim
    SG_CHECK(index.numel() == 1, "index_select: index into a 0-dim tensor must have 1 value, got ", index.numel());
    return reshape(index_select(reshape(x, {1}), 0, index), {});
  }
  check_index_range(index, x.size(dim), "index_select", dim_of(x, dim));
  Shape shape = x.sizes();
  shape[dim] = index.numel();
  Tensor out = empty(shape, {x.dtype(), x.device()});
  kernels::index_select(out, x, dim, index);
  // d out / d x: each selected slice's gradient adds back into the slice it came from (repeats sum)
  return record("IndexSelectBackward", out, {x},
                [input_shape = x.sizes(), dim, saved_index = SavedTensor(index)](const Tensor& g, const NeedsGrad&) {
                  Tensor grad = zeros(input_shape, {g.dtype(), g.device()});
                  kernels::index_add(grad, dim, saved_index.get(), g);
                  return TensorList{grad};
                });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype(index, "gather");
  check_same_device(x, index, "gather");
  if (x.dim() == 0 || index.dim() == 0) return reshape(gather(at_least_1d(x), dim, at_least_1d(index)), index.sizes());
  dim = wrap_dim(dim, x.dim(), "gather");
  bool fits = index.dim() == x.dim();
  for (int64_t d = 0; fits && d < x.dim(); ++d) fits = d == dim || index.size(d) <= x.size(d);
  SG_CHECK(fits, "gather: index of shape ", shape_str(index.sizes()),
           " must have the input's number of dims and "
           "be no larger than the input of shape ",
           shape_str(x.sizes()), " apart from dim ", dim);
  check_index_range(index, x.size(dim), "gather", dim_of(x, dim));
  Tensor out = empty(index.sizes(), {x.dtype(), x.device()});
  kernels::gather(out, x, dim, index);
  // d out / d x: each gradient element adds back to the element it was read from
  return record("GatherBackward", out, {x},
                [input_shape = x.sizes(), dim, saved_index = SavedTensor(index)](const Tensor& g, const NeedsGrad&) {
                  Tensor grad = zeros(input_shape, {g.dtype(), g.device()});
                  kernels::scatter_add(grad, dim, saved_index.get(), g);
                  return TensorList{grad};
                });
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (const auto cast = autograd::autocast(autograd::AutocastOp::scatter_add, x, src))
    return scatter_add((*cast)[0], dim, index, (*cast)[1]);
  check_index_dtype(index, "scatter_add");
  check_same_device(x, index, "scatter_add");
  check_same_device(x, src, "scatter_add");
  SG_CHECK(src.dtype() == x.dtype(), "scatter_add: src is ", src.dtype(), " but the input is ", x.dtype());
  if (x.dim() == 0 || index.dim() == 0 || src.dim() == 0)
    return reshape(scatter_add(at_least_1d(x), dim, at_least_1d(index), at_least_1d(src)), x.sizes());
  dim = wrap_dim(dim, x.dim(), "scatter_add");
  bool fits = index.dim() == x.dim() && src.dim() == x.dim();
  for (int64_t d = 0; fits && d < x.dim(); ++d)
    fits = index.size(d) <= src.size(d) && (d == dim || index.size(d) <= x.size(d));
  SG_CHECK(fits, "scatter_add: index of shape ", shape_str(index.sizes()),
           " must have the same number of dims as "
           "src of shape ",
           shape_str(src.sizes()), " and the input of shape ", shape_str(x.sizes()),
           ", and be no larger than src, nor than the input apart from dim ", dim);
  check_index_range(index, x.size(dim), "scatter_add", dim_of(x, dim));
  Tensor out = empty(x.sizes(), {x.dtype(), x.device()});
  kernels::copy(out, x);
  kernels::scatter_add(out, dim, index, src);
  // d out / d x = 1; d out / d src: each src element gets the gradient of the element it was
  // added to, gather(g, dim, index); src elements that no index position reads get zero
  return record(
      "ScatterAddBackward", out, {x, src},
      [dim, saved_index = SavedTensor(index), src_shape = src.sizes()](const Tensor& g, const NeedsGrad& needs) {
        return TensorList{needs[0] ? g : Tensor(),
                          needs[1] ? zero_padded(gather(g, dim, saved_index.get()), src_shape) : Tensor()};
      });
}

namespace {
// What embedding and embedding_renorm_ check: a 2-D weight and indices into its rows.
void check_embedding_inputs(const Tensor& weight, const Tensor& indices, const char* op_name) {
  check_index_dtype(indices, op_name);
  check_same_device(weight, indices, op_name);
  SG_CHECK(weight.dim() == 2, op_name, ": weight must be 2-D [num_embeddings, embedding_dim], got shape ",
           shape_str(weight.sizes()));
  check_index_range(indices, weight.size(0), op_name,
                    detail::concat("num_embeddings of weight ", shape_str(weight.sizes())));
}
}  // namespace

std::optional<int64_t> wrap_padding_idx(std::optional<int64_t> padding_idx, int64_t num_embeddings,
                                        const char* op_name) {
  if (!padding_idx) return std::nullopt;
  SG_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings, op_name, ": padding_idx ", *padding_idx,
           " is out of range for num_embeddings ", num_embeddings);
  return *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  check_embedding_inputs(weight, indices, "embedding");
  padding_idx = wrap_padding_idx(padding_idx, weight.size(0), "embedding");
  const Tensor flat = reshape(indices, {-1});
  const int64_t count = flat.numel(), embedding_dim = weight.size(1);
  Tensor rows = empty({count, embedding_dim}, {weight.dtype(), weight.device()});
  kernels::index_select(rows, weight, 0, flat);
  Shape shape = indices.sizes();
  shape.push_back(embedding_dim);
  // d out / d weight: each looked-up row's gradient adds into its weight row (repeated ids sum);
  // the padding row's gradient is zero
  return record("EmbeddingBackward", reshape(rows, shape), {weight},
                [weight_shape = weight.sizes(), saved_flat = SavedTensor(flat), count, padding_idx](const Tensor& g,
                                                                                                    const NeedsGrad&) {
                  Tensor grad = zeros(weight_shape, {g.dtype(), g.device()});
                  kernels::index_add(grad, 0, saved_flat.get(), reshape(g, {count, weight_shape[1]}));
                  if (padding_idx) kernels::fill(narrow(grad, 0, *padding_idx, 1), 0.0);
                  return TensorList{grad};
                });
}

Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  check_embedding_inputs(weight, indices, "embedding_renorm_");
  NoGradGuard no_grad;  // a change of the table's values, like an optimizer step: not part of the graph
  const Tensor flat = reshape(indices, {-1});
  const Tensor lookups = zeros({weight.size(0), 1}, {DType::i64, weight.device()});  // per row
  kernels::index_add(lookups, 0, flat, ones({flat.numel(), 1}, {DType::i64, weight.device()}));
  // Rows that are not looked up count as norm 0, so they are left as they are (scaled by 1).
  const Tensor norms = where(gt(lookups, 0.0), norm(weight, norm_type, {1}, /*keepdim=*/true), 0.0);
  weight.mul_(where(gt(norms, max_norm), max_norm / (norms + 1e-7), 1.0));
  return weight;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_index_dtype(indices, "one_hot");
  if (indices.numel() == 0) {
    SG_CHECK(num_classes > 0, "one_hot: cannot infer the number of classes from an empty tensor; pass num_classes");
  } else {
    const auto [lowest, highest] = kernels::index_range(indices);
    SG_CHECK(lowest >= 0, "one_hot: class values must be non-negative, got index ", lowest);
    if (num_classes == -1) num_classes = highest + 1;  // PyTorch's default: max + 1
    SG_CHECK(highest < num_classes, "one_hot: index ", highest, " is out of range for size ", num_classes,
             " (num_classes)");
  }
  Shape shape = indices.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, {DType::i64, indices.device()});
  if (indices.numel() > 0) kernels::one_hot(out, indices);
  return out;
}

namespace {
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower) {
  const char* op_name = lower ? "tril" : "triu";
  SG_CHECK(x.dim() >= 2, op_name, ": expected a tensor with at least 2 dims, got shape ", shape_str(x.sizes()));
  Tensor out = empty(x.sizes(), {x.dtype(), x.device()});
  kernels::triangle(out, x, diagonal, lower);
  // d out / d x: the same mask, applied to the gradient
  return record(
      lower ? "TrilBackward" : "TriuBackward", out, {x},
      [diagonal, lower](const Tensor& g, const NeedsGrad&) { return TensorList{triangle(g, diagonal, lower)}; });
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false); }

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return sg::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return sg::gather(*this, dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return sg::scatter_add(*this, dim, index, src);
}
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return sg::split(*this, split_size, dim); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return sg::chunk(*this, chunks, dim); }
Tensor Tensor::tril(int64_t diagonal) const { return sg::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return sg::triu(*this, diagonal); }

}  // namespace sg
