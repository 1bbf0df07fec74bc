#pragma once
// defines: TensorImpl, AutogradMetaInterface — what a Tensor handle points to.
#include <memory>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace sg {

// Note [Autograd meta is opaque to core]
// core knows that a tensor may carry autograd state, but not what it is: autograd/ derives
// its AutogradMeta (requires_grad, grad, grad_fn, hooks) from this interface. This keeps the
// layering core <- autograd while letting every tensor carry its history, as PyTorch does.
struct AutogradMetaInterface {
  virtual ~AutogradMetaInterface() = default;
};

// Storage + offset + sizes + strides + dtype. Offsets and strides count elements, not bytes.
// A view is a second TensorImpl on the same Storage.
struct TensorImpl {
  TensorImpl(std::shared_ptr<Storage> storage, int64_t storage_offset, Shape sizes, Shape strides, DType dtype)
      : storage(std::move(storage)),
        storage_offset(storage_offset),
        sizes(std::move(sizes)),
        strides(std::move(strides)),
        dtype(dtype) {}

  std::shared_ptr<Storage> storage;
  int64_t storage_offset = 0;
  Shape sizes;
  Shape strides;
  DType dtype;
  std::unique_ptr<AutogradMetaInterface> autograd_meta;  // null until autograd needs it
};

}  // namespace sg
