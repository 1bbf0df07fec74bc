#pragma once
// defines: scaled_dot_product_attention, AttentionOptions, attention_dropout_mask — attention as one
//          fused op, as torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x semantics).
//          Kernel: core/kernels/attention.h; the algorithm: docs/attention.md.
#include <cstdint>
#include <optional>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg {

struct AttentionOptions {
  // Broadcastable to [..., L, S]. bool: a key takes part where true; q's dtype: added to the scores
  // (-inf masks). Not differentiated: a mask that requires grad is refused.
  Tensor attn_mask{};
  // Zeroes each attention probability with this probability and scales the rest by 1 / (1 - p),
  // whenever it is > 0 (the op has no training flag, as in PyTorch).
  double dropout_p = 0.0;
  // Query i attends to keys 0 .. i only (top-left aligned when L != S, as PyTorch). Setting it
  // together with attn_mask is an error, as in PyTorch.
  bool is_causal = false;
  std::optional<double> scale = std::nullopt;  // multiplies q . k; default 1 / sqrt(E)
};

// softmax(q k^T * scale + mask) v for q [..., L, E], k [..., S, E], v [..., S, Ev] (their leading
// dims broadcast), giving [..., L, Ev]. One autograd op with its own backward, which keeps only
// the per-row log-sum-exp (and, on the CPU with dropout, one bit per probability) and recomputes
// the probabilities (memory O(L + S) per row, never L x S numbers).
// q, k, v may be any views (e.g. heads of one packed projection): they are read where they lie.
// A row whose keys are all masked gives 0 and a zero gradient (as PyTorch 2.x's fused kernels).
// Dropout draws from `generator` (the default one when null) through a counter-based hash, so the
// backward drops the same probabilities: on the CPU it reads the forward's decisions, kept as one
// bit each (S / 8 bytes per query row), on CUDA it draws them again (Note [Attention dropout from a
// counter], core/attention_math.h).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const AttentionOptions& options = {}, Generator* generator = nullptr);

// The dropout keep-mask (bool, `shape` = [batch..., L, S], on the CPU) that a call with these
// batch sizes, L, S and dropout_p draws when `generator` is at (seed, first_block) = (its seed(),
// its offset()) just before the call: what tests compare the fused op against.
Tensor attention_dropout_mask(const Shape& shape, double dropout_p, uint64_t seed, uint64_t first_block);

}  // namespace sg
