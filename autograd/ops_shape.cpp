// Differentiable shape ops. View ops build a new TensorImpl on the same storage; their
// backward routes the gradient back into the input's shape.
#include "autograd/ops_shape.h"

#include <numeric>
#include <optional>

#include "autograd/function.h"
#include "autograd/ops_pointwise.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg {

using autograd::AutogradMeta;
using autograd::meta_of;
using autograd::NeedsGrad;
using autograd::record;
using autograd::record_view;

namespace {

Tensor make_view(const Tensor& x, Shape sizes, Shape strides, int64_t storage_offset) {
  return Tensor(
      std::make_shared<TensorImpl>(x.storage(), storage_offset, std::move(sizes), std::move(strides), x.dtype()));
}

// Replaces one -1 in `shape` by the size that keeps numel; checks the total.
Shape infer_shape(Shape shape, int64_t numel, const char* op_name, const Shape& input_shape) {
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      SG_CHECK(!infer, op_name, ": only one dimension can be -1, got ", shape_str(shape));
      infer = i;
    } else {
      SG_CHECK(shape[i] >= 0, op_name, ": invalid size in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer) {
    SG_CHECK(known != 0 && numel % known == 0, op_name, ": shape ", shape_str(shape), " is invalid for input of shape ",
             shape_str(input_shape));
    shape[*infer] = numel / known;
  }
  SG_CHECK(numel_of(shape) == numel, op_name, ": shape ", shape_str(shape), " is invalid for input of shape ",
           shape_str(input_shape), " (", numel, " elements)");
  return shape;
}

// Strides that let `sizes` view memory laid out as (old_sizes, old_strides), if any exist: each
// run of old dims that is contiguous in memory may be re-split freely (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& sizes) {
  if (old_sizes.empty()) return Shape(sizes.size(), 1);
  if (numel_of(old_sizes) == 0) return contiguous_strides(sizes);
  Shape strides(sizes.size());
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    // End of a contiguous chunk: lay the view dims over it.
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

Tensor reshape_backward(const Tensor& g, const Shape& input_shape) { return g.reshape(input_shape); }

}  // namespace

Tensor view(const Tensor& x, Shape shape) {
  shape = infer_shape(std::move(shape), x.numel(), "view", x.sizes());
  auto strides = view_strides(x.sizes(), x.strides(), shape);
  SG_CHECK(strides.has_value(), "view: shape ", shape_str(shape), " is not compatible with the input's size ",
           shape_str(x.sizes()), " and strides ", shape_str(x.strides()), "; use reshape() (which copies)");
  Tensor out = make_view(x, shape, *strides, x.storage_offset());
  return record_view("ViewBackward", out, x, [input_shape = x.sizes()](const Tensor& g, const NeedsGrad&) {
    return TensorList{reshape_backward(g, input_shape)};
  });
}

Tensor reshape(const Tensor& x, Shape shape) {
  shape = infer_shape(std::move(shape), x.numel(), "reshape", x.sizes());
  if (view_strides(x.sizes(), x.strides(), shape)) return view(x, shape);
  return view(contiguous(x), shape);
}

namespace {

// x's view with its dims in the order `dims` (checked, each in [0, x.dim())): no history.
Tensor permuted_view(const Tensor& x, const Shape& dims) {
  Shape sizes(dims.size()), strides(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    sizes[i] = x.size(dims[i]);
    strides[i] = x.stride(dims[i]);
  }
  return make_view(x, sizes, strides, x.storage_offset());
}

}  // namespace

Tensor permute(const Tensor& x, const Shape& dims) {
  SG_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: got ", dims.size(), " dims ", shape_str(dims),
           " for a tensor of shape ", shape_str(x.sizes()));
  Shape wrapped(dims.size()), inverse(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "permute");
    SG_CHECK(!used[d], "permute: dim ", d, " repeated in ", shape_str(dims));
    used[d] = true;
    wrapped[i] = d;
    inverse[d] = static_cast<int64_t>(i);
  }
  // The gradient is permuted back by the inverse permutation.
  Tensor out = record_view("PermuteBackward", permuted_view(x, wrapped), x,
                           [inverse](const Tensor& g, const NeedsGrad&) { return TensorList{permute(g, inverse)}; });
  // A Linear's weight.t() is such a view: its gradient can be written into the weight's home.
  if (AutogradMeta* meta = meta_of(out); meta != nullptr && meta->grad_fn != nullptr)
    meta->grad_fn->set_view_replay([wrapped](const Tensor& t) { return permuted_view(t, wrapped); });
  return out;
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  Shape dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (x.dim() == 0) return x;
  std::swap(dims[wrap_dim(dim0, x.dim(), "transpose")], dims[wrap_dim(dim1, x.dim(), "transpose")]);
  return permute(x, dims);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  const int64_t stride = dim < x.dim() ? sizes[dim] * strides[dim] : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  return record_view("UnsqueezeBackward", out, x, [input_shape = x.sizes()](const Tensor& g, const NeedsGrad&) {
    return TensorList{reshape_backward(g, input_shape)};
  });
}

namespace {
Tensor squeeze_dims(const Tensor& x, const std::vector<bool>& drop) {
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (drop[d]) continue;
    sizes.push_back(x.size(d));
    strides.push_back(x.stride(d));
  }
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  return record_view("SqueezeBackward", out, x, [input_shape = x.sizes()](const Tensor& g, const NeedsGrad&) {
    return TensorList{reshape_backward(g, input_shape)};
  });
}
}  // namespace

Tensor squeeze(const Tensor& x) {
  std::vector<bool> drop(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) drop[d] = x.size(d) == 1;
  return squeeze_dims(x, drop);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  std::vector<bool> drop(x.dim(), false);
  if (x.dim() > 0) {
    dim = wrap_dim(dim, x.dim(), "squeeze");
    drop[dim] = x.size(dim) == 1;
  }
  return squeeze_dims(x, drop);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  SG_CHECK(static_cast<int64_t>(shape.size()) >= x.dim(), "expand: cannot expand shape ", shape_str(x.sizes()),
           " to fewer dims ", shape_str(shape));
  const int64_t leading = static_cast<int64_t>(shape.size()) - x.dim();
  Shape sizes(shape.size()), strides(shape.size());
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < leading) {
      SG_CHECK(shape[i] >= 0, "expand: -1 is not allowed for new leading dims in ", shape_str(shape));
      sizes[i] = shape[i];
      strides[i] = 0;
      continue;
    }
    const int64_t own = x.size(i - leading);
    const int64_t want = shape[i] == -1 ? own : shape[i];
    SG_CHECK(own == want || own == 1, "expand: shape ", shape_str(x.sizes()), " cannot be expanded to ",
             shape_str(shape), " (dim ", i, ": ", own, " vs ", want, ")");
    sizes[i] = want;
    strides[i] = own == want ? x.stride(i - leading) : 0;
  }
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  // Every copy of an element receives gradient: sum them back.
  return record_view("ExpandBackward", out, x, [input_shape = x.sizes()](const Tensor& g, const NeedsGrad&) {
    return TensorList{autograd::sum_to(g, input_shape)};
  });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  dim = wrap_dim(dim, x.dim(), "slice");
  SG_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t size = x.size(dim);
  // Python's rules: negative bounds count from the end, out-of-range bounds are clamped.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[dim] = (end - start + step - 1) / step;
  strides[dim] *= step;
  Tensor out = make_view(x, sizes, strides, x.storage_offset() + start * x.stride(dim));
  // The gradient lands in the sliced positions of a zero tensor.
  return record_view("SliceBackward", out, x,
                     [input_shape = x.sizes(), dim, start, end, step](const Tensor& g, const NeedsGrad&) {
                       Tensor grad = zeros(input_shape, {g.dtype(), g.device()});
                       kernels::copy(slice(grad, dim, start, end, step), g);
                       return TensorList{grad};
                     });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  dim = wrap_dim(dim, x.dim(), "narrow");
  if (start < 0) start += x.size(dim);
  SG_CHECK(start >= 0 && length >= 0 && start + length <= x.size(dim), "narrow: range [", start, ", ", start + length,
           ") is out of bounds for dim ", dim, " of shape ", shape_str(x.sizes()));
  return slice(x, dim, start, start + length);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  SG_CHECK(x.dim() > 0, "select: cannot select from a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.size(dim);
  SG_CHECK(index >= -size && index < size, "select: index ", index, " is out of range for dim ", dim, " of shape ",
           shape_str(x.sizes()));
  if (index < 0) index += size;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  Tensor out = make_view(x, sizes, strides, x.storage_offset() + index * x.stride(dim));
  return record_view("SelectBackward", out, x,
                     [input_shape = x.sizes(), dim, index](const Tensor& g, const NeedsGrad&) {
                       Tensor grad = zeros(input_shape, {g.dtype(), g.device()});
                       kernels::copy(select(grad, dim, index), g);
                       return TensorList{grad};
                     });
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  SG_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape shape(x.sizes().begin(), x.sizes().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= x.size(d);
  shape.push_back(merged);
  shape.insert(shape.end(), x.sizes().begin() + end_dim + 1, x.sizes().end());
  return reshape(x, shape);
}

Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t storage_offset) {
  SG_CHECK(sizes.size() == strides.size(), "as_strided: sizes ", shape_str(sizes), " and strides ", shape_str(strides),
           " differ in length");
  SG_CHECK(!x.requires_grad(),
           "as_strided: not differentiable; use view ops (reshape, permute, slice) on "
           "tensors that require grad");
  int64_t last = storage_offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    SG_CHECK(sizes[d] >= 0 && strides[d] >= 0, "as_strided: negative size or stride");
    if (sizes[d] == 0) last = -1;
    if (last >= 0) last += (sizes[d] - 1) * strides[d];
  }
  SG_CHECK(storage_offset >= 0 && (last < 0 || (last + 1) * static_cast<int64_t>(x.element_size()) <=
                                                   static_cast<int64_t>(x.storage()->nbytes())),
           "as_strided: the view reaches element ", last, ", beyond the storage of ",
           x.storage()->nbytes() / x.element_size(), " elements");
  return make_view(x, sizes, strides, storage_offset);
}

Tensor clone(const Tensor& x) {
  Tensor out = empty(x.sizes(), {x.dtype(), x.device()});
  kernels::copy(out, x);
  return record("CloneBackward", out, {x}, [](const Tensor& g, const NeedsGrad&) { return TensorList{g}; });
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.sizes(), {dtype, x.device()});
  kernels::copy(out, x);
  if (!is_floating(dtype)) return out;  // integer results carry no gradient
  // The gradient arrives in the new dtype and goes back in the old one.
  return record("ToDtypeBackward", out, {x},
                [from = x.dtype()](const Tensor& g, const NeedsGrad&) { return TensorList{to_dtype(g, from)}; });
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor out = empty(x.sizes(), {x.dtype(), device});
  kernels::copy(out, x);
  if (!is_floating(x.dtype())) return out;
  // The gradient arrives on the new device and goes back to the old one.
  return record("ToDeviceBackward", out, {x},
                [from = x.device()](const Tensor& g, const NeedsGrad&) { return TensorList{to_device(g, from)}; });
}

Tensor& copy_(Tensor& dst, const Tensor& src) {
  SG_CHECK(broadcast_shapes(dst.sizes(), src.sizes(), "copy_") == dst.sizes(), "copy_: source of shape ",
           shape_str(src.sizes()), " cannot be broadcast to the destination's shape ", shape_str(dst.sizes()));
  if (!autograd::any_requires_grad({dst, src})) {
    kernels::copy(dst, src);
    dst.storage()->bump_version();
    return dst;
  }
  return autograd::apply_in_place(
      dst,
      [&](const Tensor& old) {
        Tensor value = empty(old.sizes(), {old.dtype(), old.device()});
        kernels::copy(value, src);
        // The old value is overwritten (no gradient); src receives the gradient, reduced to its shape.
        return record("CopyBackward", value, {old, src},
                      [src_shape = src.sizes(), src_dtype = src.dtype()](const Tensor& g, const NeedsGrad& needs) {
                        return TensorList{needs[0] ? zeros_like(g) : Tensor(),
                                          needs[1] ? to_dtype(autograd::sum_to(g, src_shape), src_dtype) : Tensor()};
                      });
      },
      {src}, "copy_");
}

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

Tensor Tensor::view(const Shape& shape) const { return sg::view(*this, shape); }
Tensor Tensor::reshape(const Shape& shape) const { return sg::reshape(*this, shape); }
Tensor Tensor::permute(const Shape& dims) const { return sg::permute(*this, dims); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return sg::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const {
  SG_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got shape ", shape_str(sizes()));
  return dim() < 2 ? *this : sg::transpose(*this, 0, 1);
}
Tensor Tensor::unsqueeze(int64_t dim) const { return sg::unsqueeze(*this, dim); }
Tensor Tensor::squeeze() const { return sg::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return sg::squeeze(*this, dim); }
Tensor Tensor::expand(const Shape& shape) const { return sg::expand(*this, shape); }
Tensor Tensor::expand_as(const Tensor& other) const { return sg::expand(*this, other.sizes()); }
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return sg::narrow(*this, dim, start, length);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return sg::slice(*this, dim, start, end, step);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return sg::select(*this, dim, index); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return sg::flatten(*this, start_dim, end_dim); }
Tensor Tensor::contiguous() const { return sg::contiguous(*this); }
Tensor Tensor::clone() const { return sg::clone(*this); }
Tensor Tensor::to(DType dtype) const { return sg::to_dtype(*this, dtype); }
Tensor Tensor::to(Device device) const { return sg::to_device(*this, device); }
Tensor& Tensor::copy_(const Tensor& src) { return sg::copy_(*this, src); }

}  // namespace sg
