#pragma once
// defines: optim::Optimizer (param groups, per-parameter state, zero_grad, state_dict, named_state),
//          optim::OptimizerWithOptions<Options> (the typed param groups SGD, Adam and AdamW use),
//          ParamState, OptimizerState.
//
// As in PyTorch, an optimizer holds parameter groups; each group is a list of parameters plus
// its own hyperparameters (lr, weight_decay, ...), so one model can train its embeddings and
// its other weights with different settings. State (momentum, moment estimates, step counts)
// is kept per parameter and created on the parameter's first step.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/profiler.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace sg::optim {

// What an optimizer remembers about one parameter between steps; each optimizer uses a subset.
struct ParamState {
  int64_t step = 0;        // Adam, AdamW: number of updates applied
  Tensor exp_avg;          // Adam, AdamW: first moment estimate
  Tensor exp_avg_sq;       // Adam, AdamW: second moment estimate
  Tensor max_exp_avg_sq;   // Adam, AdamW with amsgrad: running max of exp_avg_sq
  Tensor momentum_buffer;  // SGD with momentum
};

// A group's hyperparameters by name; bools are stored as 0 or 1.
using Hyperparameters = std::map<std::string, double>;

// An optimizer's state_dict, shaped like PyTorch's: parameters are numbered in group order
// (group 0's first parameter is 0), and the tensors are named "state.<index>.<field>" with the
// fields of ParamState ("state.3.exp_avg"; the step count is a 0-dim i64 tensor).
struct OptimizerState {
  std::string type;                           // "Adam", "SGD", ...: loading checks it
  std::map<std::string, Tensor> tensors;      // only parameters that have state appear
  std::vector<Hyperparameters> param_groups;  // one per group
  std::vector<int64_t> group_sizes;           // number of parameters in each group
};

class Optimizer {
public:
  // `type_name` ("Adam") names the optimizer in errors and state dicts; it is passed in rather
  // than virtual because the constructors check parameters before the derived class exists.
  explicit Optimizer(std::string type_name)
      : type_name_(std::move(type_name)),
        step_event_name_(type_name_ + ".step") {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& type_name() const { return type_name_; }
  // Updates every parameter that has a gradient (without recording autograd history);
  // parameters whose .grad is undefined are skipped, as in PyTorch.
  virtual void step() = 0;
  // Clears every parameter's .grad (set_to_none, PyTorch's default) or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  // Group access that does not depend on the optimizer's options type (schedulers, GradScaler,
  // checkpoints use these).
  virtual size_t num_param_groups() const = 0;
  virtual const TensorList& params(size_t group) const = 0;
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  virtual Hyperparameters hyperparameters(size_t group) const = 0;
  // Every field must be given exactly once and hold a value the options accept (a negative lr
  // throws, naming it); unknown or missing names throw, listing them.
  virtual void set_hyperparameters(size_t group, const Hyperparameters& values) = 0;
  // Throws exactly where set_hyperparameters would, and changes nothing.
  virtual void check_hyperparameters(size_t group, const Hyperparameters& values) const = 0;
  // Every parameter of every group, in group order (the numbering OptimizerState uses).
  TensorList all_params() const;

  // The state of `param`, or nullptr before its first step.
  const ParamState* state(const Tensor& param) const;

  // References the live state tensors (no copies): save or copy them before stepping again.
  // Virtual, with named_state and load_state_dict, for an optimizer that keeps only a shard of
  // the state (dist::ZeroRedundancyOptimizer).
  virtual OptimizerState state_dict() const;
  // The same tensors named for people: "optimizer state exp_avg of module.fc.weight", with each
  // parameter's name in `named_params` (the model's named_parameters()), or "of parameter 3" (the
  // state_dict index) for one not there. DDP's replica check names the state that differs by them.
  virtual nn::NamedTensors named_state(const nn::NamedTensors& named_params) const;
  // Copies `state` in (state tensors are cloned to each parameter's device). A type, group count,
  // group size, field name, tensor shape or dtype that does not match, a hyperparameter the options
  // refuse, or a step count below 1 throws, listing every problem, and leaves this optimizer unchanged.
  virtual void load_state_dict(const OptimizerState& state);

protected:
  // What the profiler calls a step ("Adam.step"), made once so that a step not profiled builds no string.
  const std::string& step_event_name() const { return step_event_name_; }
  // The state of `param`, created empty on first use.
  ParamState& state_for(const Tensor& param) { return state_[param.impl()]; }
  // Throws if `params` is empty, holds an undefined or non-leaf tensor, or repeats a parameter
  // already in this optimizer (one parameter in two groups would be updated twice).
  void check_new_params(const TensorList& params) const;
  // Throws unless param.grad() matches param in shape, dtype (floating) and device.
  void check_grad(const Tensor& param, size_t group, size_t index) const;
  // Throws naming `group` unless `values` holds exactly the names hyperparameters(group) has.
  void check_hyperparameter_names(size_t group, const Hyperparameters& values) const;

private:
  // Calls visit(index in all_params(), parameter, field, tensor) for each state tensor, the step
  // count as a 0-dim i64 tensor, in parameter order.
  void for_each_state_tensor(const std::function<void(size_t index, const Tensor& param, const std::string& field,
                                                      const Tensor& value)>& visit) const;

  std::string type_name_;
  std::string step_event_name_;
  std::map<const TensorImpl*, ParamState> state_;
};

// An optimizer whose groups carry a typed options struct. `Options` lists its fields through
//   template <typename Self, typename Visit> static void fields(Self& self, Visit&& visit)
// calling visit("name", self.field) for each double or bool field, one of them "lr", and has
// `void check() const` throwing on invalid values.
template <typename Options>
class OptimizerWithOptions : public Optimizer {
public:
  struct ParamGroup {
    TensorList params;
    Options options;
  };

  OptimizerWithOptions(std::string type_name, TensorList params, Options defaults)
      : Optimizer(std::move(type_name)),
        defaults_(defaults) {
    add_param_group(std::move(params));
  }

  // A new group; its options default to the ones the optimizer was built with.
  void add_param_group(TensorList params, std::optional<Options> options = std::nullopt) {
    check_new_params(params);
    const Options chosen = options.value_or(defaults_);
    chosen.check();
    groups_.push_back({std::move(params), chosen});
  }
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }

  size_t num_param_groups() const override { return groups_.size(); }
  const TensorList& params(size_t group) const override { return groups_.at(group).params; }
  double lr(size_t group) const override { return groups_.at(group).options.lr; }
  void set_lr(size_t group, double lr) override { groups_.at(group).options.lr = lr; }

  Hyperparameters hyperparameters(size_t group) const override {
    Hyperparameters values;
    Options::fields(groups_.at(group).options,
                    [&](const char* name, const auto& field) { values[name] = static_cast<double>(field); });
    return values;
  }

  void set_hyperparameters(size_t group, const Hyperparameters& values) override {
    groups_.at(group).options = options_from(group, values);
  }
  void check_hyperparameters(size_t group, const Hyperparameters& values) const override {
    options_from(group, values);
  }

protected:
  // Calls update(param, grad, options, state) for every parameter that has a gradient, with
  // grad mode off, then bumps the parameter's version (autograd then refuses a graph that saved
  // the old value, as after PyTorch's in-place update).
  template <typename Update>
  void for_each_param_with_grad(Update&& update) {
    const profiler::RecordScope scope(step_event_name(), profiler::Category::optimizer);
    NoGradGuard no_grad;
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (size_t i = 0; i < groups_[g].params.size(); ++i) {
        Tensor& param = groups_[g].params[i];
        if (!param.grad().defined()) continue;
        check_grad(param, g, i);
        update(param, param.grad(), groups_[g].options, state_for(param));
        param.storage()->bump_version();
      }
    }
  }

private:
  // `values` as group `group`'s options, checked: names first, then Options::check.
  Options options_from(size_t group, const Hyperparameters& values) const {
    check_hyperparameter_names(group, values);
    Options options = groups_.at(group).options;
    Options::fields(options, [&](const char* name, auto& field) {
      using Field = std::remove_reference_t<decltype(field)>;
      if constexpr (std::is_same_v<Field, bool>) field = values.at(name) != 0.0;
      else field = values.at(name);
    });
    options.check();
    return options;
  }

  Options defaults_;
  std::vector<ParamGroup> groups_;
};

}  // namespace sg::optim
