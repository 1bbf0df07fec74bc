#include "nn/module.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops_shape.h"
#include "nn/module_path.h"

namespace sg::nn {

Tensor Module::forward(const Tensor&) {
  SG_FAIL(type_name(), ": this module has no single-tensor forward; call its own forward(...)");
}

Tensor Module::operator()(const Tensor& input) {
  ModuleCallScope call_scope(*this);  // the module path anomaly mode names (nn/module_path.h)
  if (hooks_->empty()) return forward(input);
  return call_with_hooks(input);
}

Tensor Module::call_with_hooks(Tensor input) {
  const ModuleHooks hooks = *hooks_;  // a hook that adds or removes hooks changes the next call
  for (const auto& [id, hook] : hooks.forward_pre)
    if (std::optional<Tensor> replaced = hook(*this, input)) input = std::move(*replaced);
  std::shared_ptr<BackwardHookCall> backward_call;
  if (!hooks.backward.empty() && GradMode::is_enabled()) {
    std::vector<BackwardHook> backward_hooks;
    for (const auto& [id, hook] : hooks.backward) backward_hooks.push_back(hook);
    backward_call = std::make_shared<BackwardHookCall>(*this, std::move(backward_hooks));
    input = backward_call->wrap_input(input);
  }
  Tensor output = forward(input);
  for (const auto& [id, hook] : hooks.forward)
    if (std::optional<Tensor> replaced = hook(*this, input, output)) output = std::move(*replaced);
  return backward_call ? backward_call->wrap_output(output) : output;
}

namespace {

template <typename Hook>
RemovableHandle add_hook(const std::shared_ptr<ModuleHooks>& hooks, std::vector<std::pair<uint64_t, Hook>>& list,
                         Hook hook, const std::string& module_name) {
  SG_CHECK(hook != nullptr, module_name, ": cannot register an empty hook");
  const uint64_t id = hooks->next_id++;
  list.emplace_back(id, std::move(hook));
  return RemovableHandle([owner = std::weak_ptr<ModuleHooks>(hooks), id] {
    if (auto alive = owner.lock()) alive->remove(id);
  });
}

}  // namespace

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  return add_hook(hooks_, hooks_->forward_pre, std::move(hook), type_name());
}

RemovableHandle Module::register_forward_hook(ForwardHook hook) {
  return add_hook(hooks_, hooks_->forward, std::move(hook), type_name());
}

RemovableHandle Module::register_full_backward_hook(BackwardHook hook) {
  return add_hook(hooks_, hooks_->backward, std::move(hook), type_name());
}

void Module::check_new_name(const std::string& name) const {
  SG_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": invalid name '", name,
           "' (must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  SG_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), type_name(), ": the name '", name,
           "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  SG_CHECK(tensor.defined(), type_name(), ": parameter '", name, "' is undefined");
  tensor.requires_grad_(requires_grad);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name);
  buffers_.emplace_back(name, tensor);
  if (!persistent) non_persistent_buffers_.insert(name);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  SG_CHECK(module != nullptr, type_name(), ": submodule '", name, "' is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(NamedTensors Module::*member, const std::string& prefix, bool recurse, NamedTensors& out) const {
  for (const auto& [name, tensor] : this->*member)
    if (tensor.defined()) out.emplace_back(prefix + name, tensor);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(member, prefix + name + ".", true, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect(&Module::parameters_, "", recurse, out);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect(&Module::buffers_, "", recurse, out);
  return out;
}

NamedTensors Module::named_persistent_buffers() const {
  NamedTensors out;  // in named_buffers()'s order: this module's own, then each child's
  for (const auto& [name, tensor] : buffers_)
    if (tensor.defined() && !non_persistent_buffers_.contains(name)) out.emplace_back(name, tensor);
  for (const auto& [child_name, child] : children_)
    for (auto& [name, tensor] : child->named_persistent_buffers()) out.emplace_back(child_name + "." + name, tensor);
  return out;
}

namespace {
TensorList values_of(const NamedTensors& named) {
  TensorList out;
  for (const auto& entry : named) out.push_back(entry.second);
  return out;
}
}  // namespace

TensorList Module::parameters(bool recurse) const { return values_of(named_parameters(recurse)); }
TensorList Module::buffers(bool recurse) const { return values_of(named_buffers(recurse)); }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& entry : children_) out.push_back(entry.second);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  // A module on the stack, or a member of another object, has no shared_ptr owning it, and
  // shared_from_this would throw a bare std::bad_weak_ptr. It is listed through a pointer that owns
  // nothing (the aliasing constructor with an empty owner): valid while the module lives, as a
  // reference to it would be.
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out{{"", self}};
  for (const auto& [name, child] : children_)
    for (auto& [sub_name, module] : child->named_modules())
      out.emplace_back(sub_name.empty() ? name : name + "." + sub_name, module);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& entry : children_) entry.second->apply(fn);
  fn(*this);
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& entry : children_) entry.second->train(on);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else p.mutable_grad().zero_();
  }
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (TensorList list : {parameters(), buffers()})
    for (Tensor& t : list) {
      if (!is_floating(t.dtype()) || t.dtype() == dtype) continue;
      t.set_data(t.to(dtype));
      if (t.grad().defined()) t.set_grad(t.grad().to(dtype));
    }
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (TensorList list : {parameters(), buffers()})
    for (Tensor& t : list) t.set_data(t.to(device));
}

StateDict Module::state_dict() const {
  StateDict state;
  for (const auto& named : {named_parameters(), named_persistent_buffers()})
    for (const auto& [name, tensor] : named) state[name] = tensor.detach();
  return state;
}

namespace {
std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}
}  // namespace

Module::LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  LoadResult result;
  std::vector<std::string> mismatched, mistyped;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source), applied only if all checks pass
  std::set<std::string> known;
  for (const auto& named : {named_parameters(), named_persistent_buffers()}) {
    for (const auto& [name, tensor] : named) {
      known.insert(name);
      auto it = state.find(name);
      if (it == state.end()) {
        result.missing_keys.push_back(name);
      } else if (it->second.sizes() != tensor.sizes()) {
        mismatched.push_back(name + " (checkpoint " + shape_str(it->second.sizes()) + ", model " +
                             shape_str(tensor.sizes()) + ")");
      } else if (it->second.dtype() != tensor.dtype()) {  // copy_ would convert it silently
        mistyped.push_back(name + " (checkpoint " + dtype_name(it->second.dtype()) + ", model " +
                           dtype_name(tensor.dtype()) + ")");
      } else {
        copies.emplace_back(tensor, it->second);
      }
    }
  }
  for (const auto& [name, tensor] : state)
    if (!known.count(name)) result.unexpected_keys.push_back(name);

  std::ostringstream problems;
  if (!mismatched.empty()) problems << "\n  mis-shaped keys: " << join(mismatched);
  if (!mistyped.empty()) problems << "\n  mis-typed keys: " << join(mistyped);
  if (strict && !result.missing_keys.empty()) problems << "\n  missing keys: " << join(result.missing_keys);
  if (strict && !result.unexpected_keys.empty()) problems << "\n  unexpected keys: " << join(result.unexpected_keys);
  SG_CHECK(problems.str().empty(), "load_state_dict: the state does not match ", type_name(), problems.str());

  NoGradGuard no_grad;
  for (auto& [destination, source] : copies) destination.copy_(source);
  return result;
}

std::string Module::str() const {
  std::ostringstream out;
  out << type_name() << "(" << extra_repr();
  if (!children_.empty()) {
    out << "\n";
    for (const auto& [name, child] : children_) {
      std::string text = child->str();
      // Indent nested lines under this module.
      for (size_t pos = text.find('\n'); pos != std::string::npos; pos = text.find('\n', pos + 1))
        text.insert(pos + 1, "  ");
      out << "  (" << name << "): " << text << "\n";
    }
  }
  out << ")";
  return out.str();
}

}  // namespace sg::nn
