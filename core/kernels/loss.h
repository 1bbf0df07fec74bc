#pragma once
// defines: Reduction, ClassScores and the fused cross-entropy kernels (which also serve
//          nll_loss), forward and backward.
//
// Shape letters: N batch, C classes, D positions per sample (the product of the dims after the
// class dim; 1 for an [N, C] input). A row is the C scores of one (sample, position): element c
// of row n * D + d sits at (n * C + c) * D + d of the contiguous input. Its target is the i64
// value target[n * D + d].
//
// For a row with log-probabilities logp (log_softmax of the logits, or the input itself),
// target t, class weights w (all 1 when undefined), smoothing s and
//   q_c = (1 - s) * w_t * [c == t] + (s / C) * w_c,
// the row's loss is -sum_c q_c * logp_c, and 0 when t == ignore_index. The mean divides the sum
// by total_weight = the sum of w_t over the rows that are not ignored — PyTorch's definition,
// label smoothing included.
#include "core/tensor.h"

namespace sg {
enum class Reduction { none, mean, sum };
// What the input's class dim holds: logits (cross_entropy: the log-softmax is fused in) or
// log-probabilities (nll_loss).
enum class ClassScores { logits, log_probabilities };
inline const char* class_loss_name(ClassScores scores) {
  return scores == ClassScores::logits ? "cross_entropy" : "nll_loss";
}
}  // namespace sg

namespace sg::kernels {

struct CrossEntropyArgs {
  ClassScores scores = ClassScores::logits;
  Tensor weight;  // [C] in the input's dtype, or undefined
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::mean;
};

// out: the per-row losses shaped like target (Reduction::none) or a 0-dim sum or mean, in the
// input's dtype. log_sum_exp ([N * D] f64; logits only, else undefined) and total_weight (0-dim
// f64) receive what the backward needs. Throws, before computing anything, when a target is
// neither in [0, C) nor ignore_index, naming the value and C.
void cross_entropy(const Tensor& out, const Tensor& log_sum_exp, const Tensor& total_weight, const Tensor& input,
                   const Tensor& target, const CrossEntropyArgs& args);
// grad_input (the input's shape and dtype) = scale * (softmax * sum_c q_c - q) for logits,
// -scale * q for log-probabilities, 0 on ignored rows, where scale is the row's grad_output
// (none), grad_output (sum) or grad_output / total_weight (mean). `input` is read for logits only.
void cross_entropy_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& log_sum_exp,
                            const Tensor& total_weight, const Tensor& input, const Tensor& target,
                            const CrossEntropyArgs& args);

}  // namespace sg::kernels
