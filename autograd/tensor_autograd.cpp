// The autograd methods of Tensor (declared in core/tensor.h; see Note [Where Tensor methods
// are defined]).
#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/tensor.h"

namespace sg {

using autograd::ensure_meta;
using autograd::meta_of;

bool Tensor::requires_grad() const {
  const autograd::AutogradMeta* meta = meta_of(*this);
  return meta != nullptr && meta->requires_grad;
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  if (!requires_grad && !this->requires_grad()) return *this;
  auto& meta = ensure_meta(*this);
  SG_CHECK(!meta.grad_fn || requires_grad,
           "requires_grad_: cannot turn off requires_grad of a non-leaf "
           "tensor (use detach() instead)");
  SG_CHECK(!requires_grad || is_floating(dtype()),
           "requires_grad_: only floating tensors can require "
           "gradients, this one is ",
           dtype());
  meta.requires_grad = requires_grad;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const autograd::AutogradMeta* meta = meta_of(*this);
  return meta ? meta->grad : undefined;
}

Tensor& Tensor::mutable_grad() { return ensure_meta(*this).grad; }

void Tensor::set_grad(const Tensor& grad) {
  SG_CHECK(!grad.defined() || grad.sizes() == sizes(), "set_grad: gradient of shape ", shape_str(grad.sizes()),
           " for a tensor of shape ", shape_str(sizes()));
  ensure_meta(*this).grad = grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const autograd::AutogradMeta* meta = meta_of(*this);
  return meta ? meta->grad_fn : nullptr;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::run_backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const { return alias(); }

Tensor& Tensor::detach_() {
  if (auto* meta = meta_of(*this)) {
    meta->grad_fn = nullptr;
    meta->requires_grad = false;
  }
  return *this;
}

void Tensor::retain_grad() {
  auto& meta = ensure_meta(*this);
  SG_CHECK(meta.requires_grad, "retain_grad: the tensor does not require grad");
  if (!meta.grad_fn || meta.retains_grad) return;  // leaves keep their grad anyway
  meta.retains_grad = true;
  std::weak_ptr<TensorImpl> weak_self = impl_ptr();
  meta.grad_fn->add_pre_hook([weak_self](const Tensor& grad) {
    if (auto self = weak_self.lock()) {
      Tensor owner(self);
      Tensor& stored = ensure_meta(owner).grad;
      stored = stored.defined() ? stored + grad : grad.clone();
    }
    return Tensor();
  });
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) {
  auto& meta = ensure_meta(*this);
  SG_CHECK(meta.requires_grad,
           "register_hook: cannot register a hook on a tensor that does not "
           "require grad");
  if (meta.grad_fn) meta.grad_fn->add_pre_hook(std::move(hook));
  else meta.hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) {
  auto& meta = ensure_meta(*this);
  SG_CHECK(meta.requires_grad && !meta.grad_fn,
           "register_post_accumulate_grad_hook: only leaf tensors "
           "that require grad accumulate gradients");
  meta.post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace sg
