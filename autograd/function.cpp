#include "autograd/function.h"

#include "autograd/anomaly_mode.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "core/kernels/pointwise.h"

namespace sg::autograd {

bool any_requires_grad(const TensorList& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(const char* name, Tensor out, const TensorList& inputs, BackwardFn backward) {
  if (!any_requires_grad(inputs)) return out;
  std::vector<std::shared_ptr<Node>> next_nodes;
  next_nodes.reserve(inputs.size());
  for (const auto& t : inputs) next_nodes.push_back(gradient_edge(t));
  AutogradMeta& meta = ensure_meta(out);
  meta.requires_grad = true;
  auto node = std::make_shared<Node>(name, std::move(next_nodes), std::move(backward));
  if (is_anomaly_enabled()) {  // Note [Anomaly mode]
    node->set_forward_record(make_forward_record(name, inputs));
    if (is_anomaly_check_nan_enabled()) check_forward_output(*node->forward_record(), out, inputs);
  }
  meta.grad_fn = std::move(node);
  return out;
}

Tensor record_view(const char* name, Tensor out, const Tensor& base, BackwardFn backward) {
  out = record(name, std::move(out), {base}, std::move(backward));
  if (AutogradMeta* meta = meta_of(out)) meta->is_view = true;
  return out;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t leading = grad.dim() - static_cast<int64_t>(shape.size());
  SG_CHECK(leading >= 0, "sum_to: cannot reduce shape ", shape_str(grad.sizes()), " to ", shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < leading || (shape[d - leading] == 1 && grad.size(d) != 1)) dims.push_back(d);
  Tensor reduced = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return reduced.reshape(shape);
}

namespace {

// `value` (self's old value, or an alias of it) given self's history, after checking that self may
// be modified in place.
Tensor with_history_of(const Tensor& self, Tensor value, const char* op_name) {
  AutogradMeta* meta = meta_of(self);
  SG_CHECK(!(meta && meta->requires_grad && !meta->grad_fn), op_name,
           ": a leaf tensor that requires grad cannot be modified in place (wrap the update in "
           "NoGradGuard, as optimizers do)");
  SG_CHECK(!(meta && meta->requires_grad && meta->is_view), op_name,
           ": in-place modification of a view of a tensor that requires grad is not supported "
           "(its base's gradient would be wrong); use the out-of-place op or clone() the view");
  if (meta && meta->requires_grad) {
    AutogradMeta& value_meta = ensure_meta(value);
    value_meta.requires_grad = true;
    value_meta.grad_fn = meta->grad_fn;
  }
  return value;
}

// Makes `result`'s history self's, once self's storage holds the result.
void take_history(Tensor& self, const Tensor& result) {
  AutogradMeta& self_meta = ensure_meta(self);
  self_meta.requires_grad = true;
  self_meta.grad_fn = meta_of(result)->grad_fn;
}

}  // namespace

Tensor& apply_in_place(Tensor& self, const std::function<Tensor(const Tensor&)>& compute,
                       const TensorList& other_inputs, const char* op_name) {
  TensorList all_inputs = other_inputs;
  all_inputs.push_back(self);
  if (!any_requires_grad(all_inputs)) {
    Tensor result = compute(self);
    if (!result.is_same(self)) kernels::copy(self, result);
    self.storage()->bump_version();
    return self;
  }
  // self_before: self's old value as a new tensor carrying self's old history.
  Tensor self_before = with_history_of(self, self.alias().clone(), op_name);
  Tensor result = compute(self_before);
  SG_CHECK(result.sizes() == self.sizes(), op_name, ": result of shape ", shape_str(result.sizes()),
           " cannot be written in place into a tensor of shape ", shape_str(self.sizes()));
  kernels::copy(self, result);
  self.storage()->bump_version();
  take_history(self, result);
  return self;
}

Tensor& apply_in_place_keeping_output(Tensor& self, const std::function<void(const Tensor&)>& write_in_place,
                                      const char* backward_name,
                                      const std::function<BackwardFn(const Tensor&)>& backward_of_output,
                                      const char* op_name) {
  if (!any_requires_grad({self})) {
    write_in_place(self);
    self.storage()->bump_version();
    return self;
  }
  // An alias, not a copy: only its history is needed, as the recorded op's input.
  const Tensor self_before = with_history_of(self, self.alias(), op_name);
  write_in_place(self);
  self.storage()->bump_version();  // before `out` is saved: the backward checks this version
  const Tensor out = self.alias();
  const Tensor result = record(backward_name, out, {self_before}, backward_of_output(out));
  take_history(self, result);
  return self;
}

}  // namespace sg::autograd
