#include "optim/optimizer.h"

#include <functional>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"

namespace sg::optim {

namespace {
// The tensor fields of ParamState, by the name they take in a state dict.
constexpr std::pair<const char*, Tensor ParamState::*> kStateTensors[] = {
    {"exp_avg", &ParamState::exp_avg},
    {"exp_avg_sq", &ParamState::exp_avg_sq},
    {"max_exp_avg_sq", &ParamState::max_exp_avg_sq},
    {"momentum_buffer", &ParamState::momentum_buffer},
};

Tensor ParamState::*state_tensor_named(const std::string& name) {
  for (const auto& [field_name, member] : kStateTensors)
    if (name == field_name) return member;
  return nullptr;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// "state.<index>.<field>" split into its parts; false when `key` does not have that form.
bool parse_state_key(const std::string& key, int64_t& index, std::string& field) {
  const std::string prefix = "state.";
  if (key.rfind(prefix, 0) != 0) return false;
  const size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  const std::string digits = key.substr(prefix.size(), dot - prefix.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  index = std::stoll(digits);
  field = key.substr(dot + 1);
  return true;
}

// Names in `given` that `expected` lacks, and the other way round, as readable problems.
std::vector<std::string> hyperparameter_problems(size_t group, const Hyperparameters& expected,
                                                 const Hyperparameters& given) {
  std::vector<std::string> unknown, missing;
  for (const auto& entry : given)
    if (!expected.count(entry.first)) unknown.push_back(entry.first);
  for (const auto& entry : expected)
    if (!given.count(entry.first)) missing.push_back(entry.first);
  std::vector<std::string> problems;
  const std::string where = "group " + std::to_string(group) + ": ";
  if (!unknown.empty()) problems.push_back(where + "unknown hyperparameters " + join(unknown, ", "));
  if (!missing.empty()) problems.push_back(where + "missing hyperparameters " + join(missing, ", "));
  return problems;
}
}  // namespace

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : all_params()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else p.mutable_grad().zero_();
  }
}

TensorList Optimizer::all_params() const {
  TensorList out;
  for (size_t g = 0; g < num_param_groups(); ++g)
    for (const Tensor& p : params(g)) out.push_back(p);
  return out;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

void Optimizer::check_new_params(const TensorList& params) const {
  SG_CHECK(!params.empty(), type_name(), ": got an empty parameter list");
  std::set<const TensorImpl*> seen;
  for (const Tensor& p : all_params()) seen.insert(p.impl());
  for (size_t i = 0; i < params.size(); ++i) {
    SG_CHECK(params[i].defined(), type_name(), ": parameter ", i, " of the new group is undefined");
    SG_CHECK(params[i].is_leaf(), type_name(), ": parameter ", i, " of the new group is not a leaf (",
             "an optimizer can only update tensors that no op computed)");
    SG_CHECK(seen.insert(params[i].impl()).second, type_name(), ": parameter ", i,
             " of the new group appears in more than one parameter group");
  }
}

void Optimizer::check_grad(const Tensor& param, size_t group, size_t index) const {
  const Tensor& grad = param.grad();
  SG_CHECK(is_floating(param.dtype()), type_name(), ": parameter ", index, " of group ", group, " is ", param.dtype(),
           "; only floating parameters can be optimized");
  SG_CHECK(grad.sizes() == param.sizes() && grad.dtype() == param.dtype() && grad.device() == param.device(),
           type_name(), ": the gradient of parameter ", index, " of group ", group, " is ", grad.dtype(), " ",
           shape_str(grad.sizes()), " on ", grad.device(), ", the parameter ", param.dtype(), " ",
           shape_str(param.sizes()), " on ", param.device());
}

void Optimizer::check_hyperparameter_names(size_t group, const Hyperparameters& values) const {
  const auto problems = hyperparameter_problems(group, hyperparameters(group), values);
  SG_CHECK(problems.empty(), type_name(), ": ", join(problems, "; "));
}

void Optimizer::for_each_state_tensor(
    const std::function<void(size_t index, const Tensor& param, const std::string& field, const Tensor& value)>& visit)
    const {
  const TensorList params = all_params();
  for (size_t index = 0; index < params.size(); ++index) {
    const ParamState* s = state(params[index]);
    if (s == nullptr) continue;
    if (s->step > 0) visit(index, params[index], "step", scalar_tensor(static_cast<double>(s->step), {DType::i64}));
    for (const auto& [name, member] : kStateTensors)
      if ((s->*member).defined()) visit(index, params[index], name, (s->*member).detach());
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.type = type_name();
  for (size_t g = 0; g < num_param_groups(); ++g) {
    out.param_groups.push_back(hyperparameters(g));
    out.group_sizes.push_back(static_cast<int64_t>(params(g).size()));
  }
  for_each_state_tensor([&](size_t index, const Tensor&, const std::string& field, const Tensor& value) {
    out.tensors["state." + std::to_string(index) + "." + field] = value;
  });
  return out;
}

nn::NamedTensors Optimizer::named_state(const nn::NamedTensors& named_params) const {
  std::map<const TensorImpl*, std::string> names;
  for (const auto& [name, p] : named_params) names.emplace(p.impl(), name);
  nn::NamedTensors out;
  for_each_state_tensor([&](size_t index, const Tensor& param, const std::string& field, const Tensor& value) {
    const auto name = names.find(param.impl());
    out.emplace_back("optimizer state " + field + " of " +
                         (name != names.end() ? name->second : "parameter " + std::to_string(index)),
                     value);
  });
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  std::vector<std::string> problems;
  if (state.type != type_name()) problems.push_back("it was saved by " + state.type);
  const size_t num_groups = num_param_groups();
  if (state.param_groups.size() != num_groups || state.group_sizes.size() != num_groups) {
    problems.push_back("it has " + std::to_string(state.param_groups.size()) + " parameter groups, this optimizer " +
                       std::to_string(num_groups));
  } else {
    for (size_t g = 0; g < num_groups; ++g) {
      if (state.group_sizes[g] != static_cast<int64_t>(params(g).size()))
        problems.push_back("group " + std::to_string(g) + " has " + std::to_string(state.group_sizes[g]) +
                           " parameters, this optimizer's " + std::to_string(params(g).size()));
      const auto name_problems = hyperparameter_problems(g, hyperparameters(g), state.param_groups[g]);
      problems.insert(problems.end(), name_problems.begin(), name_problems.end());
      if (!name_problems.empty()) continue;
      try {  // the values: a file can hold an lr of -1 as well as any other number
        check_hyperparameters(g, state.param_groups[g]);
      } catch (const Error& error) {
        problems.push_back("group " + std::to_string(g) + ": " + error.what());
      }
    }
  }

  // Check every state tensor against its parameter before changing anything.
  const TensorList params_in_order = all_params();
  std::map<const TensorImpl*, ParamState> new_state;
  for (const auto& [key, tensor] : state.tensors) {
    int64_t index = 0;
    std::string field;
    if (!parse_state_key(key, index, field)) {
      problems.push_back("unexpected key " + key);
      continue;
    }
    if (index >= static_cast<int64_t>(params_in_order.size())) {
      problems.push_back(key + " names parameter " + std::to_string(index) + ", this optimizer has " +
                         std::to_string(params_in_order.size()));
      continue;
    }
    const Tensor& param = params_in_order[index];
    ParamState& target = new_state[param.impl()];
    if (field == "step") {
      // state_dict writes a step only once it is positive (a parameter's first update makes it 1).
      if (tensor.numel() != 1) problems.push_back(key + " has " + std::to_string(tensor.numel()) + " elements, not 1");
      else if (tensor.dtype() != DType::i64)
        problems.push_back(key + " is " + dtype_name(tensor.dtype()) + ", not i64");
      else if (const int64_t step = tensor.item<int64_t>(); step < 1)
        problems.push_back(key + " is " + std::to_string(step) + "; a saved step count is at least 1");
      else target.step = step;
    } else if (Tensor ParamState::*member = state_tensor_named(field)) {
      if (tensor.sizes() != param.sizes()) {
        problems.push_back(key + " has shape " + shape_str(tensor.sizes()) + ", its parameter " +
                           shape_str(param.sizes()));
      } else if (tensor.dtype() != param.dtype()) {  // a relabelled tensor in a file, say
        problems.push_back(key + " is " + dtype_name(tensor.dtype()) + ", its parameter " + dtype_name(param.dtype()));
      } else {
        NoGradGuard no_grad;
        target.*member = tensor.detach().to(param.device()).clone();
      }
    } else {
      problems.push_back("unexpected key " + key + " (unknown state field '" + field + "')");
    }
  }
  SG_CHECK(problems.empty(), type_name(), ".load_state_dict: the state does not match this optimizer:\n  ",
           join(problems, "\n  "));

  for (size_t g = 0; g < num_groups; ++g) set_hyperparameters(g, state.param_groups[g]);
  state_ = std::move(new_state);
}

}  // namespace sg::optim
