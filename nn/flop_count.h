#pragma once
// defines: nn::forward_flops, nn::training_flops — the model FLOPs of a forward pass and of a training
//          step of any model built from Conv2d and Linear layers, counted by running it once.
//
// Note [Model FLOPs]
// "Model FLOPs" (PaLM, appendix B; nanoGPT's and llm.c's MFU) count only the matrix products a model
// needs — a multiply-add as 2 FLOPs — not what an implementation happens to execute (recomputation,
// padding, im2col copies) and not the element-wise work (BatchNorm, ReLU, pooling, softmax, the
// optimizer), which is a few FLOPs per element against hundreds per output of a product. A training step
// is 3 forwards: the backward of a product takes two products of the same size, one for the gradient of
// its input and one for that of its weight. So for every Conv2d and Linear call,
//   forward multiply-adds = output elements x (weight elements / output channels)
// (Linear: in_features per output; Conv2d: in_channels / groups x kernel_h x kernel_w), the bias left out
// as torchvision's and fvcore's GFLOPS leave it. The layers' outputs are read by forward hooks, so only
// layers called through operator() count (Note [Module hooks]): products a forward writes with tensor ops
// of its own (GPT's attention, MultiheadAttention) are not seen — models::gpt_training_flops_per_token
// counts GPT by its formula instead.
#include <cstdint>

#include "nn/module.h"

namespace sg::nn {

// FLOPs of model(sample_input): runs it once without autograd and in eval mode (no BatchNorm statistics
// updated, no dropout draws), then restores every module's mode. Scales with sample_input's batch, so a
// batch of one gives the FLOPs per example. Throws when the forward calls no Conv2d or Linear layer,
// rather than reporting 0.
int64_t forward_flops(Module& model, const Tensor& sample_input);

// 3 x forward_flops: the model FLOPs of one forward + backward on sample_input.
int64_t training_flops(Module& model, const Tensor& sample_input);

}  // namespace sg::nn
