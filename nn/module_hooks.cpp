#include "nn/module_hooks.h"

#include <algorithm>

#include "autograd/function.h"
#include "nn/module.h"

namespace sg::nn {

void RemovableHandle::remove() {
  if (!remover_) return;
  std::function<void()> remover = std::move(remover_);
  remover_ = nullptr;
  remover();
}

void ModuleHooks::remove(uint64_t id) {
  auto erase_id = [id](auto& hooks) { std::erase_if(hooks, [id](const auto& entry) { return entry.first == id; }); };
  erase_id(forward_pre);
  erase_id(forward);
  erase_id(backward);
}

BackwardHookCall::BackwardHookCall(Module& module, std::vector<BackwardHook> hooks)
    : module_(&module),
      hooks_(std::move(hooks)) {}

Tensor BackwardHookCall::wrap_input(const Tensor& input) {
  input_requires_grad_ = autograd::any_requires_grad({input});
  if (!input_requires_grad_) return input;
  // identity: grad_input is the gradient arriving here, after the hooks have seen it
  return autograd::record(
      "BackwardHookFunctionBackward", input.alias(), {input},
      [call = shared_from_this()](const Tensor& grad, const autograd::NeedsGrad&) { return call->run_hooks({grad}); });
}

Tensor BackwardHookCall::wrap_output(const Tensor& output) {
  if (!autograd::any_requires_grad({output})) return output;
  // identity: remembers grad_output for the input's node (or runs the hooks now if there is none)
  return autograd::record("BackwardHookFunctionBackward", output.alias(), {output},
                          [call = shared_from_this()](const Tensor& grad, const autograd::NeedsGrad&) {
                            call->grad_output_ = {grad};
                            if (!call->input_requires_grad_) call->run_hooks({Tensor()});
                            return TensorList{grad};
                          });
}

TensorList BackwardHookCall::run_hooks(TensorList grad_input) {
  const std::string module_name = module_->type_name();
  for (const auto& hook : hooks_) {
    std::optional<TensorList> replaced = hook(*module_, grad_input, grad_output_);
    if (!replaced) continue;
    SG_CHECK(input_requires_grad_, module_name,
             ": a full backward hook returned a grad_input, but no input of the module requires grad "
             "(return std::nullopt)");
    SG_CHECK(replaced->size() == grad_input.size(), module_name, ": a full backward hook returned ", replaced->size(),
             " grad_input tensors, but the module has ", grad_input.size(), " input");
    for (size_t i = 0; i < grad_input.size(); ++i)
      SG_CHECK(!(*replaced)[i].defined() || (*replaced)[i].sizes() == grad_input[i].sizes(), module_name,
               ": a full backward hook returned a grad_input of shape ", shape_str((*replaced)[i].sizes()),
               " for an input of shape ", shape_str(grad_input[i].sizes()));
    grad_input = std::move(*replaced);
  }
  return grad_input;
}

}  // namespace sg::nn
