// The backward engine, in the spirit of micrograd's `backward()`, with what a real one needs:
// dependency counts (a node runs once, after all its consumers have sent their gradients),
// summing of gradients that meet at a node, and a deterministic order.
//
// Note [Backward order]
// Ready nodes run latest-created first (PyTorch's sequence-number rule), except leaf sinks
// (AccumulateGrad), which run the moment they are ready. So a parameter's gradient is in .grad
// and its post-accumulate hook has fired as early as possible — the hook DDP uses to start a
// bucket's all-reduce while the rest of backward is still running.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly_mode.h"
#include "autograd/autocast_state.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops_pointwise.h"
#include "core/factory.h"
#include "core/profiler.h"

namespace sg::autograd {

namespace {

struct ReadyOrder {
  bool operator()(const Node* a, const Node* b) const {
    if (a->is_sink() != b->is_sink()) return b->is_sink();  // sinks first
    return a->sequence_number() < b->sequence_number();     // then the newest
  }
};

// How many consumers each node waits for, over the graph reachable from `root`.
std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen{root};
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next_nodes()) {
      if (!next) continue;
      ++dependencies[next.get()];
      if (seen.insert(next.get()).second) stack.push_back(next.get());
    }
  }
  return dependencies;
}

// The callbacks of the backward running on this thread; null outside backward. A pointer to a
// local of run_backward, restored on exit, so a backward started inside a callback gets its own.
thread_local std::vector<std::function<void()>>* queued_callbacks = nullptr;

struct CallbackScope {
  std::vector<std::function<void()>> callbacks;
  std::vector<std::function<void()>>* outer = queued_callbacks;
  CallbackScope() { queued_callbacks = &callbacks; }
  ~CallbackScope() { queued_callbacks = outer; }
};

}  // namespace

void queue_callback(std::function<void()> callback) {
  SG_CHECK(queued_callbacks != nullptr, "queue_callback: no backward pass is running on this thread");
  queued_callbacks->push_back(std::move(callback));
}

// Note [A gradient written where it lands]
// DDP keeps each parameter's gradient in its bucket (Note [Gradients are views into their
// buckets] in dist/reducer.cpp). After zero_grad() (set_to_none, the default, as in PyTorch) a
// backward function would compute a fresh gradient and DDP would copy it into the bucket: one
// more pass over every gradient byte, about 9 ms per step of ResNet34's 85 MB on two ranks. A
// leaf can instead say where its gradient should land (AutogradMeta::grad_home). A backward
// function that writes its result into a tensor it allocates asks gradient_output for that
// tensor, and gets the home when the input is such a leaf, its .grad is undefined, and the home
// has not gone out yet in this backward (nested passes of activation checkpointing included);
// AccumulateGrad then adopts the home as .grad. A backward function asks for one input at most.
// Whatever else happens (a second contribution, which the engine adds out of place; a leaf that
// already holds a gradient; a hook that replaces it; another dtype or shape) takes the old path,
// and DDP's copy into the bucket writes over what the home held. conv2d's weight gradient asks:
// most parameter bytes of a CNN are there. So does a matrix product's for its second operand. A
// Linear multiplies by weight.t(), a view, so the leaf is one node further: the view's node
// repeats its view on the home (Node::replay_view), the product writes into home.t(), the view's
// backward hands back a tensor laid out on the home's bytes as the home is, and AccumulateGrad
// adopts the home itself.

namespace {

// What gradient_output needs to know: the node whose backward function runs on this thread, and
// the sinks whose home went out in this backward (nested passes included), each at most once.
thread_local const Node* running_node = nullptr;
thread_local std::unordered_set<const Node*>* homes_handed_out = nullptr;

struct RunningNodeScope {
  const Node* outer = running_node;
  explicit RunningNodeScope(const Node* here) { running_node = here; }
  ~RunningNodeScope() { running_node = outer; }
};

struct HomesScope {
  std::unordered_set<const Node*> handed_out;
  std::unordered_set<const Node*>* outer = homes_handed_out;
  HomesScope() { homes_handed_out = &handed_out; }
  ~HomesScope() { homes_handed_out = outer; }
};

// The pass itself; what it queues goes to the CallbackScope that is current.
void backward_pass(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  SG_CHECK(root.defined(), "backward: tensor is undefined");
  std::shared_ptr<Node> root_node = gradient_edge(root);
  SG_CHECK(root_node != nullptr, "backward: the tensor of shape ", shape_str(root.sizes()),
           " does not require grad and has no grad_fn (did you forget requires_grad_(), or run "
           "the forward under NoGradGuard?)");
  Tensor root_grad = gradient;
  if (!root_grad.defined()) {
    SG_CHECK(root.numel() == 1,
             "backward: gradient can be implicitly created only for scalar outputs; "
             "the tensor has shape ",
             shape_str(root.sizes()), ", so pass a gradient of that shape");
    root_grad = ones(root.sizes(), {root.dtype(), root.device()});
  }
  SG_CHECK(root_grad.sizes() == root.sizes(), "backward: gradient of shape ", shape_str(root_grad.sizes()),
           " does not match the tensor's shape ", shape_str(root.sizes()));

  // One event for the whole pass; inside it, one per node run ("MmBackward") and its kernels.
  const profiler::RecordScope backward_scope("backward", profiler::Category::backward);
  NoGradGuard no_grad;  // backward formulas record no graph (no create_graph support)
  // Backward formulas never autocast: each gradient is computed in the dtype its forward ran in,
  // and ToDtype nodes carry it back to each leaf's own dtype.
  AutocastStateScope no_autocast({.enabled = false, .dtype = autocast_state().dtype});
  const bool check_nan = is_anomaly_check_nan_enabled();  // Note [Anomaly mode]
  auto dependencies = count_dependencies(root_node.get());
  std::unordered_map<Node*, Tensor> pending_grads{{root_node.get(), root_grad}};
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  ready.push(root_node.get());

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor grad = std::move(pending_grads[node]);
    pending_grads.erase(node);
    // A node whose consumers sent no gradient (all undefined) contributes nothing downstream,
    // but its inputs must still be released from waiting on it.
    TensorList input_grads;
    if (grad.defined()) {
      const profiler::RecordScope scope(node->name(), profiler::Category::backward, grad);
      const RunningNodeScope running_scope(node);
      input_grads = node->apply(std::move(grad));
    }
    if (check_nan) check_backward_outputs(node->name(), node->forward_record(), input_grads);
    if (!retain_graph) node->release();

    const auto& next_nodes = node->next_nodes();
    for (size_t i = 0; i < next_nodes.size(); ++i) {
      Node* next = next_nodes[i].get();
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor& slot = pending_grads[next];
        slot = slot.defined() ? slot + input_grads[i] : std::move(input_grads[i]);
      }
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

}  // namespace

// Note [A gradient written where it lands]
Tensor gradient_home(size_t input, const Shape& shape, const Tensor& like) {
  if (running_node == nullptr || homes_handed_out == nullptr || input >= running_node->next_nodes().size()) return {};
  const Node* next = running_node->next_nodes()[input].get();
  if (next == nullptr) return {};
  // Through one view op (weight.t()) to the leaf's sink: the view's backward turns the home seen
  // through the view back into the home.
  const bool through_view = !next->is_sink() && next->next_nodes().size() == 1;
  const Node* sink = through_view ? next->next_nodes()[0].get() : next;
  if (sink == nullptr || !sink->is_sink() || homes_handed_out->contains(sink)) return {};
  Tensor home = static_cast<const AccumulateGrad*>(sink)->vacant_grad_home();
  if (home.defined() && through_view) home = next->replay_view(home);
  if (!home.defined() || home.sizes() != shape || home.dtype() != like.dtype() || home.device() != like.device())
    return {};
  homes_handed_out->insert(sink);
  return home;
}

Tensor gradient_output(size_t input, const Shape& shape, const Tensor& like) {
  const Tensor home = gradient_home(input, shape, like);
  return home.defined() && home.is_contiguous() ? home : empty(shape, {like.dtype(), like.device()});
}

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  CallbackScope callback_scope;
  HomesScope homes_scope;
  backward_pass(root, gradient, retain_graph);
  // Indexed and moved out, not iterated: a callback may queue another one (growing the vector).
  for (size_t i = 0; i < callback_scope.callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callback_scope.callbacks[i]);
    callback();
  }
}

void run_nested_backward(const Tensor& root, const Tensor& gradient) {
  SG_CHECK(queued_callbacks != nullptr, "run_nested_backward: no backward pass is running on this thread");
  backward_pass(root, gradient, /*retain_graph=*/false);
}

}  // namespace sg::autograd
