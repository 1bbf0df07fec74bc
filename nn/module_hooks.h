#pragma once
// defines: RemovableHandle, ForwardPreHook, ForwardHook, BackwardHook — the hooks nn::Module runs
//          around a call (PyTorch's register_forward_pre_hook, register_forward_hook,
//          register_full_backward_hook), and BackwardHookCall, which gives a backward hook the
//          gradients of its module as a whole.
//
// Note [Module hooks]
// Hooks run when a module is called through operator()(const Tensor&) — Sequential, DDP's
// forward and the reference models call their children that way — never when forward() is
// called directly. Modules whose forward takes several tensors (MultiheadAttention, GPT's
// forward(idx, targets)) are called through their own forward and run no hooks: every hook here
// sees one input tensor and one output tensor. For one call, in this order:
//   1. forward pre-hooks, in registration order; one may return a replacement input, which the
//      next hooks and forward see;
//   2. with backward hooks registered and grad mode on, the input passes through an identity
//      node (BackwardHookCall::wrap_input);
//   3. forward;
//   4. forward hooks, in registration order, with the input forward saw; one may return a
//      replacement output, which the next hooks and the caller see;
//   5. the output passes through a second identity node (BackwardHookCall::wrap_output).
// In backward, the output's identity node receives grad_output (the gradient of the loss with
// respect to the module's output) and the input's identity node receives grad_input (with
// respect to its input, summed over everything the module did with it). The backward hooks run
// there, in registration order, once per call; one may return a replacement grad_input, which
// flows on to whatever produced the input. When the input needs no gradient, the hooks run at the
// output's node with an undefined grad_input and must not replace it. The hooks a call runs are
// those registered when the call began; the module must outlive the backward of that call.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace sg::nn {

class Module;

// Returned by every register_*_hook; remove() takes the hook out (a second remove() does nothing,
// and neither does one after the module is gone). Dropping the handle keeps the hook.
class RemovableHandle {
public:
  RemovableHandle() = default;
  explicit RemovableHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
  void remove();

private:
  std::function<void()> remover_;
};

// (module, input) -> a replacement input, or std::nullopt to keep it.
using ForwardPreHook = std::function<std::optional<Tensor>(Module&, const Tensor& input)>;
// (module, input, output) -> a replacement output, or std::nullopt to keep it.
using ForwardHook = std::function<std::optional<Tensor>(Module&, const Tensor& input, const Tensor& output)>;
// (module, grad_input, grad_output) -> a replacement grad_input, or std::nullopt to keep it. Lists
// of one tensor, as PyTorch's tuples are for a one-input, one-output module.
using BackwardHook =
    std::function<std::optional<TensorList>(Module&, const TensorList& grad_input, const TensorList& grad_output)>;

// A module's hooks, each with an id its handle removes it by.
struct ModuleHooks {
  std::vector<std::pair<uint64_t, ForwardPreHook>> forward_pre;
  std::vector<std::pair<uint64_t, ForwardHook>> forward;
  std::vector<std::pair<uint64_t, BackwardHook>> backward;
  uint64_t next_id = 0;

  bool empty() const { return forward_pre.empty() && forward.empty() && backward.empty(); }
  void remove(uint64_t id);
};

// One call of a module with backward hooks: the two identity nodes of Note [Module hooks] and
// what they share (grad_output travels from the output's node to the input's).
class BackwardHookCall : public std::enable_shared_from_this<BackwardHookCall> {
public:
  BackwardHookCall(Module& module, std::vector<BackwardHook> hooks);
  Tensor wrap_input(const Tensor& input);
  Tensor wrap_output(const Tensor& output);

private:
  // Runs the hooks in order; returns grad_input as the last replacement left it.
  TensorList run_hooks(TensorList grad_input);

  Module* module_;
  std::vector<BackwardHook> hooks_;
  bool input_requires_grad_ = false;
  TensorList grad_output_;
};

}  // namespace sg::nn
