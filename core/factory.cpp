#include "core/factory.h"

#include <cmath>

#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"

namespace sg {

Tensor empty(const Shape& shape, TensorOptions options) {
  for (int64_t s : shape) SG_CHECK(s >= 0, "empty: negative size in shape ", shape_str(shape));
  Shape strides = contiguous_strides(shape);  // first: it throws for shapes int64 cannot address
  int64_t nbytes = 0;
  SG_CHECK(!__builtin_mul_overflow(numel_of(shape), static_cast<int64_t>(itemsize(options.dtype)), &nbytes),
           "empty: a tensor of shape ", shape_str(shape), " and dtype ", options.dtype,
           " needs more than 2^63 - 1 bytes");
  auto storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), options.device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, std::move(strides), options.dtype));
}

Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor t = empty(shape, options);
  kernels::fill(t, value);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

namespace {
// A copy of the f64 values `source` in the dtype and on the device `options` ask for.
Tensor converted(const Tensor& source, TensorOptions options) {
  Tensor out = empty(source.sizes(), options);
  kernels::copy(out, source);
  return out;
}
}  // namespace

Tensor arange(double end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  SG_CHECK(step != 0, "arange: step must be nonzero");
  SG_CHECK((end - start) / step >= 0, "arange: the range [", start, ", ", end, ") with step ", step,
           " goes the wrong way");
  const auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return converted(tensor(values, {n}), options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  SG_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  std::vector<double> values(steps);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Fill from both ends (as PyTorch does) so the last value is exactly `end`; one step is `start`.
  for (int64_t i = 0; i < steps; ++i)
    values[i] = i < steps / 2 || steps == 1 ? start + step * static_cast<double>(i)
                                            : end - step * static_cast<double>(steps - 1 - i);
  return converted(tensor(values, {steps}), options);
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
  Tensor t = empty(shape, options);
  kernels::uniform_(t, 0.0, 1.0, generator ? *generator : default_generator());
  return t;
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
  Tensor t = empty(shape, options);
  kernels::normal_(t, 0.0, 1.0, generator ? *generator : default_generator());
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* generator) {
  SG_CHECK(low < high, "randint: expected low < high, got [", low, ", ", high, ")");
  Tensor t = empty(shape, options);
  kernels::randint_(t, low, high, generator ? *generator : default_generator());
  return t;
}

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  const Shape actual = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  SG_CHECK(numel_of(actual) == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
           " values do not fill shape ", shape_str(actual));
  Tensor t = empty(actual, {dtype_of<T>(), Device::cpu()});
  T* data = t.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) data[i] = values[i];
  return t;
}
template Tensor tensor(const std::vector<float>&, const Shape&);
template Tensor tensor(const std::vector<double>&, const Shape&);
template Tensor tensor(const std::vector<int64_t>&, const Shape&);
template Tensor tensor(const std::vector<int32_t>&, const Shape&);
template Tensor tensor(const std::vector<uint8_t>&, const Shape&);
template Tensor tensor(const std::vector<Half>&, const Shape&);
template Tensor tensor(const std::vector<BFloat16>&, const Shape&);

template <>
Tensor tensor(const std::vector<bool>& values, const Shape& shape) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  Tensor t = tensor(bytes, shape);
  t.impl()->dtype = DType::boolean;  // same one-byte layout
  return t;
}

Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> deleter,
                 const Shape& strides) {
  const Shape actual_strides = strides.empty() ? contiguous_strides(shape) : strides;
  SG_CHECK(actual_strides.size() == shape.size(), "from_blob: shape ", shape_str(shape), " and strides ",
           shape_str(actual_strides), " differ in length");
  int64_t extent = 1;  // elements spanned by the view
  for (size_t d = 0; d < shape.size(); ++d) extent += (shape[d] - 1) * actual_strides[d];
  auto storage =
      std::make_shared<Storage>(data, static_cast<size_t>(extent) * itemsize(dtype), Device::cpu(), std::move(deleter));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, actual_strides, dtype));
}

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), {t.dtype(), t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, {t.dtype(), t.device()}); }
Tensor rand_like(const Tensor& t, Generator* generator) { return rand(t.sizes(), {t.dtype(), t.device()}, generator); }
Tensor randn_like(const Tensor& t, Generator* generator) {
  return randn(t.sizes(), {t.dtype(), t.device()}, generator);
}

}  // namespace sg
