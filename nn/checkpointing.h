#pragma once
// defines: nn::checkpoint_sequential — a Sequential run in checkpointed segments (PyTorch's
//          torch.utils.checkpoint.checkpoint_sequential).
#include "autograd/checkpoint.h"
#include "nn/container.h"

namespace sg::nn {

// Splits `sequential`'s modules into `segments` runs of size() / segments modules (the last one
// takes the remainder) and returns the Sequential's forward of `input`. Every segment but the last
// goes through autograd::checkpoint (Note [Activation checkpointing]); the last runs plainly, as
// its activations are needed by the backward that comes right after. segments must be in
// [1, size()].
Tensor checkpoint_sequential(const Sequential& sequential, int64_t segments, const Tensor& input,
                             const autograd::CheckpointOptions& options = {});

}  // namespace sg::nn
