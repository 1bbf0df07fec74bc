#pragma once
// defines: Node (one recorded op in the backward graph), AccumulateGrad (a leaf's sink),
//          AutogradMeta (what a tensor knows about its history), SavedTensor.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/anomaly_mode.h"
#include "core/tensor.h"

namespace sg::autograd {

using NeedsGrad = std::vector<bool>;
// Maps the gradient of an op's output to the gradients of its inputs (one per input, undefined
// where needs_input_grad is false).
using BackwardFn = std::function<TensorList(const Tensor& grad_output, const NeedsGrad& needs_input_grad)>;
using TensorHook = std::function<Tensor(const Tensor&)>;

// Every op has exactly one differentiable output, so a Node has one incoming gradient and
// one outgoing edge per input (null where that input needs no gradient).
class Node {
public:
  Node(std::string name, std::vector<std::shared_ptr<Node>> next_nodes, BackwardFn backward);
  virtual ~Node() = default;

  const std::string& name() const { return name_; }
  const std::vector<std::shared_ptr<Node>>& next_nodes() const { return next_nodes_; }
  // Nodes created later run earlier in backward; leaves' sinks run as soon as they are ready.
  uint64_t sequence_number() const { return sequence_number_; }

  // Runs the pre-hooks, then the backward function; throws if the graph was freed. Takes the
  // gradient by value so a sink can adopt a gradient nobody else holds (see AccumulateGrad).
  virtual TensorList apply(Tensor grad_output);
  // Frees saved tensors (called after backward unless retain_graph).
  virtual void release();
  // Whether this node is a leaf's sink (AccumulateGrad): the engine runs ready sinks before
  // anything else, so a leaf's gradient hooks (DDP's bucket_ready) fire as early as possible.
  virtual bool is_sink() const { return false; }
  bool released() const { return backward_ == nullptr; }
  void add_pre_hook(TensorHook hook) { pre_hooks_.push_back(std::move(hook)); }
  // The forward op, inputs and module that made this node; null unless it was recorded in
  // anomaly mode (Note [Anomaly mode]).
  const ForwardRecord* forward_record() const { return forward_record_.get(); }
  void set_forward_record(std::unique_ptr<ForwardRecord> record) { forward_record_ = std::move(record); }
  // A view op's node can repeat its forward view on another tensor shaped like its input, with no
  // history: the gradient it passes on for `t` viewed this way is `t` itself, laid out as before
  // (Note [A gradient written where it lands] in autograd/engine.cpp). Undefined for other nodes.
  void set_view_replay(std::function<Tensor(const Tensor&)> replay) { view_replay_ = std::move(replay); }
  Tensor replay_view(const Tensor& t) const { return view_replay_ ? view_replay_(t) : Tensor(); }

protected:
  Tensor run_pre_hooks(Tensor grad) const;

private:
  std::string name_;
  std::vector<std::shared_ptr<Node>> next_nodes_;
  BackwardFn backward_;
  std::vector<TensorHook> pre_hooks_;
  uint64_t sequence_number_;
  std::unique_ptr<ForwardRecord> forward_record_;
  std::function<Tensor(const Tensor&)> view_replay_;
};

// The sink of a leaf that requires grad: adds the incoming gradient into leaf.grad, then runs
// the leaf's post-accumulate hooks (where DDP marks a parameter's gradient as ready).
class AccumulateGrad final : public Node {
public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  TensorList apply(Tensor grad_output) override;
  // The leaf's grad_home while its .grad is undefined (Note [A gradient written where it lands]
  // in autograd/engine.cpp); undefined otherwise.
  Tensor vacant_grad_home() const;
  void release() override {}  // holds nothing a second backward could miss
  bool is_sink() const override { return true; }

private:
  std::shared_ptr<TensorImpl> leaf_;
};

struct AutogradMeta final : AutogradMetaInterface {
  bool requires_grad = false;
  bool retains_grad = false;
  bool is_view = false;  // shares storage with the tensor it was viewed from
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves: their AccumulateGrad, created on demand
  std::vector<TensorHook> hooks;         // leaves: run on the gradient before accumulation
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks;
  // Leaves: where the gradient should land when .grad is undefined (DDP's bucket slot), so that a
  // backward function writes it there instead of into a tensor of its own (Note [A gradient
  // written where it lands] in autograd/engine.cpp). Undefined: nowhere in particular.
  Tensor grad_home;
  // Not empty while .grad holds only this process's part of the gradient, not its whole value
  // (ZeRO-2 averages each gradient on the rank that owns it only): why, and what to use instead,
  // for those that refuse to read it as the whole gradient (optim::clip_grad_norm_).
  std::string partial_grad_reason;
};

// The AutogradMeta of `t`, created if absent; meta_of returns null instead of creating.
AutogradMeta& ensure_meta(const Tensor& t);
AutogradMeta* meta_of(const Tensor& t);

// Why `param`'s .grad holds only part of its gradient (AutogradMeta::partial_grad_reason); empty
// when it holds the whole of it, or no gradient at all.
const std::string& partial_grad_reason(const Tensor& param);
// Throws, naming `who`, the first of `params` whose .grad holds only part of its gradient, its
// index, shape and partial_grad_reason, then `consequence` (why `who` cannot use it, and what to
// use instead).
void refuse_partial_gradients(const TensorList& params, const char* who, const char* consequence);

// The node a gradient for `t` flows into: its grad_fn, its AccumulateGrad if it is a leaf that
// requires grad, otherwise null.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

// A tensor kept for backward. It stores an alias (not the tensor with its history, which
// would form a cycle through grad_fn) and the storage version at save time, so backward can
// report "modified by an in-place operation" instead of computing a wrong gradient.
class SavedTensor {
public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor get() const;

private:
  Tensor data_;
  uint64_t saved_version_ = 0;
};

}  // namespace sg::autograd
