#pragma once
// defines: nn::functional — the losses (cross_entropy, nll_loss, mse_loss), dropout, and the
//          softmax family and scaled_dot_product_attention re-exported, as torch.nn.functional.
//          Usual spelling:
//            namespace F = sg::nn::functional;
//            Tensor loss = F::cross_entropy(logits, labels, {.label_smoothing = 0.1});
#include <cstdint>

#include "autograd/ops_attention.h"
#include "autograd/ops_reduce.h"
#include "core/generator.h"
#include "core/kernels/loss.h"  // defines: Reduction
#include "core/tensor.h"

namespace sg::nn::functional {

using sg::AttentionOptions;
using sg::log_softmax;
using sg::scaled_dot_product_attention;
using sg::softmax;

struct CrossEntropyOptions {
  Tensor weight{};                        // [C] class weights, or undefined (all 1); not differentiated
  int64_t ignore_index = -100;            // rows with this target add nothing and are not counted
  Reduction reduction = Reduction::mean;  // mean divides by the summed weight of the counted rows
  double label_smoothing = 0.0;           // in [0, 1]: the target becomes (1 - s) one_hot + s / C
};

// Cross entropy between logits [N, C] or [N, C, d1, ...] (or [C] with a 0-dim target) and i64
// class indices [N] or [N, d1, ...], exactly as torch.nn.functional.cross_entropy — weights,
// ignore_index and label smoothing combined as PyTorch combines them. One fused op: the
// log-softmax is never materialised, and the gradient is softmax minus the (smoothed, weighted)
// target in one pass. A target outside [0, C) that is not ignore_index throws naming it and C.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

struct NllLossOptions {
  Tensor weight{};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
};
// The negative log-likelihood of log-probabilities (e.g. log_softmax's output), with
// cross_entropy's shapes and options: -w_t * input[t] per row.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options = {});

// (input - target)^2, reduced; the shapes must be equal.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

// In training, zeroes each element with probability p (a Bernoulli mask from `generator`, the
// default one when null) and scales the rest by 1 / (1 - p); otherwise returns input.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* generator = nullptr);

}  // namespace sg::nn::functional
