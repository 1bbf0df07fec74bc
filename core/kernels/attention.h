#pragma once
// defines: AttentionArgs, attention_dropout_words, kernels::attention_forward, kernels::attention_backward — the fused
//          scaled dot-product attention (docs/attention.md), behind scaled_dot_product_attention
//          (autograd/ops_attention.h).
//
// Contract: q [batch..., L, E], k [batch..., S, E], v [batch..., S, Ev] share one floating dtype,
// one device and the same batch sizes (the front expands broadcast batch dims: stride 0), have a
// unit stride in their last dim and any other strides (views of one packed projection are read
// where they lie). out [batch..., L, Ev] is in q's dtype with a unit last stride and any other
// strides that do not overlap (the front lays it out as q is laid out); log_sum_exp [batch..., L]
// is contiguous in opmath_t (f32 for 16-bit inputs, f64 for f64). For query row i:
//   scores_j = scale * q_i . k_j, masked (-inf) where mask is false, where a float mask is added,
//   and, with causal, for j > i (top-left aligned, as PyTorch's tril(ones(L, S)));
//   p = softmax(scores); out_i = sum_j dropout(p)_j v_j;  log_sum_exp_i = log(sum_j exp(scores_j)).
// A row whose scores are all -inf (every key masked) gives out_i = 0 and log_sum_exp_i = -inf, and
// no gradient, as PyTorch's scaled_dot_product_attention. Nothing [L, S] is kept between forward
// and backward but, on the CPU with dropout, one bit per probability: the backward recomputes the
// probabilities from q, k and log_sum_exp. dropout_keep is undefined without dropout and on CUDA
// (whose backward draws the dropout again from the seed); on the CPU with dropout it is
// [batch..., L, attention_dropout_words(S)] i64, contiguous, written by the forward and read by the
// backward (Note [Attention dropout bits] in core/cpu/attention.cpp). The CPU kernel
// never holds a row of scores; the CUDA kernel holds the scores of a bounded group of batch entries
// to hand its products to cuBLAS (Note [CUDA attention through batched GEMMs]). Math runs in opmath_t.
#include <cstdint>

#include "core/tensor.h"

namespace sg {

struct AttentionArgs {
  Tensor mask;               // undefined, or [batch..., L, S] (any strides): bool keeps where true,
                             // q's dtype is added to the scores
  bool causal = false;       // key j > query i is masked
  double scale = 1.0;        // multiplies q . k
  double dropout_p = 0.0;    // probability of zeroing a probability (the rest scaled by 1 / (1 - p))
  uint64_t seed = 0;         // the dropout mask's Philox stream (Note [Attention dropout from a counter],
  uint64_t first_block = 0;  //   core/attention_math.h)
};

// The 64-bit words of one query row's dropout bits: bit j of word b keeps probability 64 b + j.
inline int64_t attention_dropout_words(int64_t S) { return (S + 63) / 64; }

}  // namespace sg

namespace sg::kernels {

void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& dropout_keep, const Tensor& q,
                       const Tensor& k, const Tensor& v, const AttentionArgs& args);
// grad_q, grad_k, grad_v: q's dtype, the shapes of q, k, v; grad_out: out's shape. Like out, each
// has a unit last stride and any other strides (non-overlapping for the three it writes); the CUDA
// kernel is handed contiguous ones by the dispatch, the CPU kernel reads and writes them in place.
void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const Tensor& dropout_keep, const AttentionArgs& args);

// keep [batch..., L, S] bool, contiguous, on the CPU: the dropout mask the kernels draw for `args`,
// for tests (autograd/ops_attention.h: attention_dropout_mask).
void attention_dropout_keep(const Tensor& keep, const AttentionArgs& args);

}  // namespace sg::kernels
