#include "autograd/node.h"

#include "autograd/grad_mode.h"
#include "autograd/ops_pointwise.h"

namespace sg::autograd {

namespace {

std::atomic<uint64_t> next_sequence_number{0};

// Whether `grad` is `home`, or a view of home's bytes laid out exactly as home is (a gradient
// that went through a view op's backward, such as a Linear weight's .t(), comes back that way).
bool lies_on(const Tensor& grad, const Tensor& home) {
  if (!home.defined()) return false;
  if (grad.is_same(home)) return true;
  return grad.storage() == home.storage() && grad.storage_offset() == home.storage_offset() &&
         grad.sizes() == home.sizes() && grad.strides() == home.strides() && grad.dtype() == home.dtype();
}

}  // namespace

Node::Node(std::string name, std::vector<std::shared_ptr<Node>> next_nodes, BackwardFn backward)
    : name_(std::move(name)),
      next_nodes_(std::move(next_nodes)),
      backward_(std::move(backward)),
      sequence_number_(next_sequence_number++) {}

Tensor Node::run_pre_hooks(Tensor grad) const {
  for (const auto& hook : pre_hooks_) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  return grad;
}

TensorList Node::apply(Tensor grad_output) {
  SG_CHECK(backward_ != nullptr, "backward through ", name_,
           ": the graph was already freed. Trying to backward through the graph a second time? "
           "Pass retain_graph=true to the first backward if you need to.");
  NeedsGrad needs(next_nodes_.size());
  for (size_t i = 0; i < needs.size(); ++i) needs[i] = next_nodes_[i] != nullptr;
  return backward_(run_pre_hooks(std::move(grad_output)), needs);
}

void Node::release() { backward_ = nullptr; }

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
    : Node("AccumulateGrad", {}, nullptr),
      leaf_(std::move(leaf)) {}

TensorList AccumulateGrad::apply(Tensor grad_output) {
  Tensor leaf(leaf_);
  AutogradMeta& meta = ensure_meta(leaf);
  Tensor grad = run_pre_hooks(std::move(grad_output));
  for (const auto& hook : meta.hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  SG_CHECK(grad.sizes() == leaf.sizes(), "AccumulateGrad: gradient of shape ", shape_str(grad.sizes()),
           " does not match the leaf's shape ", shape_str(leaf.sizes()));
  NoGradGuard no_grad;
  if (!meta.grad.defined() && lies_on(grad, meta.grad_home)) {
    meta.grad = meta.grad_home;  // written where it lands (Note [A gradient written where it lands])
  } else if (!meta.grad.defined()) {
    // Steal a freshly computed gradient that nobody else references; otherwise copy it, so two
    // leaves never share one .grad that later accumulation would write through.
    const bool exclusive = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1 &&
                           grad.is_contiguous() && grad.dtype() == leaf.dtype() && grad.storage_offset() == 0;
    meta.grad = exclusive ? grad.detach() : grad.to(leaf.dtype()).clone();
  } else {
    meta.grad.add_(grad);
  }
  for (const auto& hook : meta.post_accumulate_hooks) hook(leaf);
  return {};
}

Tensor AccumulateGrad::vacant_grad_home() const {
  const AutogradMeta* meta = meta_of(Tensor(leaf_));
  return meta == nullptr || meta->grad.defined() ? Tensor() : meta->grad_home;
}

AutogradMeta* meta_of(const Tensor& t) { return static_cast<AutogradMeta*>(t.impl()->autograd_meta.get()); }

const std::string& partial_grad_reason(const Tensor& param) {
  static const std::string kWhole;
  const AutogradMeta* meta = meta_of(param);
  return meta == nullptr || !meta->grad.defined() ? kWhole : meta->partial_grad_reason;
}

void refuse_partial_gradients(const TensorList& params, const char* who, const char* consequence) {
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& partial = partial_grad_reason(params[i]);
    SG_CHECK(partial.empty(), who, ": parameter ", i, " of shape ", shape_str(params[i].sizes()),
             " holds only part of its gradient (", partial, "), ", consequence);
  }
}

AutogradMeta& ensure_meta(const Tensor& t) {
  SG_CHECK(t.defined(), "autograd: tensor is undefined");
  auto& slot = t.impl()->autograd_meta;
  if (!slot) slot = std::make_unique<AutogradMeta>();
  return static_cast<AutogradMeta&>(*slot);
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined()) return nullptr;
  AutogradMeta* meta = meta_of(t);
  if (meta == nullptr || !meta->requires_grad) return nullptr;
  if (meta->grad_fn) return meta->grad_fn;
  auto accumulator = meta->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta->grad_accumulator = accumulator;
  }
  return accumulator;
}

SavedTensor::SavedTensor(const Tensor& t)
    : data_(t.defined() ? t.alias() : Tensor()),
      saved_version_(t.defined() ? t.storage()->version() : 0) {}

Tensor SavedTensor::get() const {
  if (data_.defined()) {
    SG_CHECK(data_.storage()->version() == saved_version_, "backward: a tensor of shape ", shape_str(data_.sizes()),
             " needed for the gradient was modified by an in-place operation after it was saved "
             "(version ",
             saved_version_, " -> ", data_.storage()->version(),
             "). Use the out-of-place op, or clone() before modifying.");
  }
  return data_;
}

}  // namespace sg::autograd
