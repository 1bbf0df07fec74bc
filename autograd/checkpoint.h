#pragma once
// defines: checkpoint, CheckpointOptions, is_checkpoint_recomputation — activation checkpointing (PyTorch's
//          torch.utils.checkpoint with use_reentrant=False): a segment's forward keeps no
//          activations and is run again during backward.
//
// Note [Activation checkpointing]
// A plain forward keeps every intermediate a backward formula needs (the input of each matmul,
// the mask of each dropout, ...) until backward. checkpoint(fn, inputs) instead runs fn under
// NoGradGuard, so nothing inside fn is saved, and records one node, CheckpointBackward, holding
// only the inputs. When backward reaches that node it
//   1. sets the generator back to its state before the forward (so dropout draws the same masks)
//      and the autocast state to the forward's, and restores the caller's after;
//   2. runs fn again with grad mode on, on detached copies of the inputs (each requiring grad as
//      its original did), which records the segment's graph afresh;
//   3. backpropagates the incoming gradient through it (run_nested_backward): parameters used by
//      fn get their .grad accumulated exactly as in a plain backward, and the gradients that reach
//      the detached copies are what the node passes on to the inputs.
// Memory: one segment's activations at a time instead of all of them; time: one more forward of
// each segment (about a third more per step for a model checkpointed whole).
//
// As PyTorch's non-reentrant variant, the node is recorded whenever grad mode is on, even when no
// input requires grad: the parameters fn uses still get their gradients (the output then
// requires grad; its backward contributes nothing if no recomputed tensor needs a gradient).
// fn must compute the same thing twice: it may draw from `options.generator` (replayed) but not
// from another generator, nor read state that changes between forward and backward.
// A second backward through the same node throws, as for any freed graph; modifying an input in
// place between forward and backward throws when the backward reads it.
#include <functional>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg::autograd {

struct CheckpointOptions {
  // The generator whose state the recomputation replays (the default generator when null): the
  // one fn's dropouts draw from. It must outlive the backward.
  Generator* generator = nullptr;
};

// fn(inputs) without its activations kept. fn returns one tensor: every node here has one
// differentiable output (Note [Activation checkpointing]).
Tensor checkpoint(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                  const CheckpointOptions& options = {});
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options = {});

// True on this thread while a checkpointed function runs for the second time, in backward (step 2
// of the Note). A layer that updates state in its forward reads it to do so only once per real
// forward: nn::BatchNorm leaves its running statistics alone then (Note [BatchNorm under activation
// checkpointing] in nn/batchnorm.h).
bool is_checkpoint_recomputation();

}  // namespace sg::autograd
