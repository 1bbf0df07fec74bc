#include "core/tensor.h"

#include "core/kernels/pointwise.h"

namespace sg {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* what) {
  SG_CHECK(impl != nullptr, what, ": tensor is undefined");
  return *impl;
}
}  // namespace

const Shape& Tensor::sizes() const { return checked(impl_, "sizes").sizes; }
const Shape& Tensor::strides() const { return checked(impl_, "strides").strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::numel() const { return numel_of(sizes()); }
DType Tensor::dtype() const { return checked(impl_, "dtype").dtype; }
Device Tensor::device() const { return checked(impl_, "device").storage->device(); }
int64_t Tensor::storage_offset() const { return checked(impl_, "storage_offset").storage_offset; }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_, "storage").storage; }

int64_t Tensor::size(int64_t dim) const { return sizes()[wrap_dim(dim, this->dim(), "size")]; }
int64_t Tensor::stride(int64_t dim) const { return strides()[wrap_dim(dim, this->dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  const auto& impl = checked(impl_, "is_contiguous");
  int64_t expected = 1;
  for (size_t i = impl.sizes.size(); i-- > 0;) {
    if (impl.sizes[i] == 1) continue;  // a size-1 dim's stride never matters
    if (impl.strides[i] != expected) return false;
    expected *= impl.sizes[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  const auto& impl = checked(impl_, "raw_data");
  return static_cast<char*>(impl.storage->data()) + impl.storage_offset * itemsize(impl.dtype);
}

template <typename T>
T Tensor::item() const {
  SG_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape_str(sizes()));
  if (runs_on_cuda(device(), "item")) {  // read the one value back to the host
    const Tensor host(std::make_shared<TensorImpl>(std::make_shared<Storage>(element_size(), Device::cpu()), 0,
                                                   Shape(dim(), 1), Shape(dim(), 1), dtype()));
    kernels::copy(host, *this);
    return host.item<T>();
  }
  return SG_DISPATCH_ALL(dtype(), "item", [&]<typename scalar_t>() {
    return static_cast<T>(static_cast<opmath_t<scalar_t>>(*static_cast<const scalar_t*>(raw_data())));
  });
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template int32_t Tensor::item<int32_t>() const;
template bool Tensor::item<bool>() const;

Tensor Tensor::alias() const {
  const auto& impl = checked(impl_, "alias");
  return Tensor(std::make_shared<TensorImpl>(impl.storage, impl.storage_offset, impl.sizes, impl.strides, impl.dtype));
}

void Tensor::set_data(const Tensor& other) {
  checked(impl_, "set_data");
  TensorImpl& impl = *impl_;
  const TensorImpl& source = checked(other.impl_, "set_data");
  impl.storage = source.storage;
  impl.storage_offset = source.storage_offset;
  impl.sizes = source.sizes;
  impl.strides = source.strides;
  impl.dtype = source.dtype;
}

}  // namespace sg
