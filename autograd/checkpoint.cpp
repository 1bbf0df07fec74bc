#include "autograd/checkpoint.h"

#include "autograd/autocast_state.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace sg::autograd {

namespace {

struct GeneratorState {
  uint64_t seed, offset;
};

GeneratorState state_of(const Generator& generator) { return {generator.seed(), generator.offset()}; }

void set_state(Generator& generator, GeneratorState state) {
  generator.manual_seed(state.seed);
  generator.set_offset(state.offset);
}

// While alive, `generator` is in `replayed` state; the caller's state comes back on exit.
class GeneratorReplay {
public:
  GeneratorReplay(Generator& generator, GeneratorState replayed) : generator_(generator), caller_(state_of(generator)) {
    set_state(generator_, replayed);
  }
  ~GeneratorReplay() { set_state(generator_, caller_); }
  GeneratorReplay(const GeneratorReplay&) = delete;
  GeneratorReplay& operator=(const GeneratorReplay&) = delete;

private:
  Generator& generator_;
  GeneratorState caller_;
};

thread_local bool recomputing = false;

// While alive, is_checkpoint_recomputation() is true; the previous value (true inside a nested
// checkpoint's recomputation) comes back on exit.
class RecomputationScope {
public:
  RecomputationScope() : previous_(recomputing) { recomputing = true; }
  ~RecomputationScope() { recomputing = previous_; }
  RecomputationScope(const RecomputationScope&) = delete;
  RecomputationScope& operator=(const RecomputationScope&) = delete;

private:
  bool previous_;
};

}  // namespace

bool is_checkpoint_recomputation() { return recomputing; }

Tensor checkpoint(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                  const CheckpointOptions& options) {
  for (size_t i = 0; i < inputs.size(); ++i)
    SG_CHECK(inputs[i].defined(), "checkpoint: input ", i, " is an undefined tensor");
  Generator& generator = options.generator != nullptr ? *options.generator : default_generator();
  const GeneratorState forward_rng = state_of(generator);
  const AutocastState forward_autocast = autocast_state();
  Tensor out;
  {
    NoGradGuard no_grad;  // nothing inside fn is saved for backward
    out = fn(inputs);
  }
  SG_CHECK(out.defined(), "checkpoint: fn returned an undefined tensor");
  if (!GradMode::is_enabled()) return out;
  // An input returned as is gets a handle of its own, so the node below leaves its history alone.
  for (const Tensor& input : inputs)
    if (out.is_same(input)) out = out.alias();

  std::vector<SavedTensor> saved_inputs;
  std::vector<bool> input_requires_grad;
  std::vector<std::shared_ptr<Node>> next_nodes;
  for (const Tensor& input : inputs) {
    saved_inputs.emplace_back(input);
    input_requires_grad.push_back(input.requires_grad());
    next_nodes.push_back(gradient_edge(input));
  }
  auto recompute_and_backward = [fn, saved_inputs = std::move(saved_inputs), input_requires_grad, &generator,
                                 forward_rng, forward_autocast](const Tensor& grad_output, const NeedsGrad&) {
    TensorList detached;
    for (size_t i = 0; i < saved_inputs.size(); ++i) {
      Tensor copy = saved_inputs[i].get().detach();
      copy.requires_grad_(input_requires_grad[i]);
      detached.push_back(copy);
    }
    Tensor recomputed;
    {
      const GeneratorReplay replay(generator, forward_rng);
      const AutocastStateScope autocast(forward_autocast);
      const GradModeGuard grad_mode(true);
      const RecomputationScope recomputation;
      recomputed = fn(detached);
    }
    SG_CHECK(recomputed.sizes() == grad_output.sizes(), "checkpoint: the recomputed output has shape ",
             shape_str(recomputed.sizes()), " but the forward's had ", shape_str(grad_output.sizes()),
             " (fn must compute the same thing when run again)");
    if (gradient_edge(recomputed) != nullptr) run_nested_backward(recomputed, grad_output);
    TensorList input_grads;
    for (const Tensor& copy : detached) input_grads.push_back(copy.requires_grad() ? copy.grad() : Tensor());
    return input_grads;
  };
  AutogradMeta& meta = ensure_meta(out);
  meta.requires_grad = true;
  meta.grad_fn = std::make_shared<Node>("CheckpointBackward", std::move(next_nodes), std::move(recompute_and_backward));
  return out;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options) {
  // fn is copied into the node: the recomputation runs after this call has returned.
  return checkpoint([fn](const TensorList& inputs) { return fn(inputs[0]); }, TensorList{input}, options);
}

}  // namespace sg::autograd
