#pragma once
// defines: nn::Module — the base of every layer and model: named parameters, buffers and
//          submodules, train/eval, zero_grad, to(dtype), state_dict / load_state_dict, hooks.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/module_hooks.h"

namespace sg::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = std::map<std::string, Tensor>;

// A layer registers its parameters, buffers and children by name in its constructor:
//
//   Linear(int64_t in, int64_t out) {
//     weight = register_parameter("weight", empty({out, in}));
//     ...
//   }
//
// and names compose with dots, so a model's named_parameters() reads `features.0.weight`.
// Registration order is kept: DDP buckets gradients in reverse registration order.
class Module : public std::enable_shared_from_this<Module> {
public:
  virtual ~Module() = default;

  // The single-tensor forward used by Sequential and operator(); layers with other signatures
  // define their own forward and leave this one throwing.
  virtual Tensor forward(const Tensor& input);
  // Calls forward with this module's hooks around it (Note [Module hooks] in nn/module_hooks.h),
  // the module's path on the stack anomaly mode names (nn/module_path.h).
  Tensor operator()(const Tensor& input);
  // The class name, used in printouts and error messages ("Linear", "Conv2d").
  virtual std::string type_name() const { return "Module"; }

  NamedTensors named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const;
  // This module (named "") and every descendant, depth first, in registration order. A module no
  // shared_ptr owns (one on the stack) is listed through a pointer that does not own it.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  // Calls fn on every descendant, then on this module (PyTorch's order).
  void apply(const std::function<void(Module&)>& fn);

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Clears every parameter's .grad (set_to_none) or zeroes it in place.
  void zero_grad(bool set_to_none = true);
  // Converts floating parameters and buffers in place (handles held elsewhere see the change).
  void to(DType dtype);
  void to(Device device);

  // Parameters and persistent buffers by dotted name (detached: no history).
  StateDict state_dict() const;
  struct LoadResult {
    std::vector<std::string> missing_keys;     // in the model, not in the file
    std::vector<std::string> unexpected_keys;  // in the file, not in the model
  };
  // Copies values in. Shape or dtype mismatches always throw, listing every offending key;
  // with strict, missing or unexpected keys throw too (listing them), else they are returned.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  // Hooks run by operator(), in registration order; see Note [Module hooks] in nn/module_hooks.h.
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle register_forward_hook(ForwardHook hook);
  RemovableHandle register_full_backward_hook(BackwardHook hook);

  // A readable tree of the module, like PyTorch's repr.
  std::string str() const;
  virtual std::string extra_repr() const { return ""; }

protected:
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // A buffer is state that is not trained (running statistics, masks): to() moves it and
  // buffers() lists it; a non-persistent one is also left out of state_dict() and not expected
  // by load_state_dict() (something recomputed at construction, like a causal mask).
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(NamedTensors Module::*member, const std::string& prefix, bool recurse, NamedTensors& out) const;
  // named_buffers() without the non-persistent ones: what state_dict() saves.
  NamedTensors named_persistent_buffers() const;
  Tensor call_with_hooks(Tensor input);

  NamedTensors parameters_;
  NamedTensors buffers_;
  std::set<std::string> non_persistent_buffers_;  // names of buffers_ kept out of state_dict()
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  // Shared with the handles, which hold it weakly: a handle outliving its module does nothing.
  std::shared_ptr<ModuleHooks> hooks_ = std::make_shared<ModuleHooks>();
};

}  // namespace sg::nn
