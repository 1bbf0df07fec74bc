#pragma once
// defines: math::AttentionBatch (where matrix n of a strided batch starts), math::attention_keep
//          (the dropout draw of one probability) — shared by the CPU kernel (core/cpu/attention.cpp)
//          and the CUDA kernel (core/cuda/attention.cu), so both walk the same memory and drop the
//          same probabilities.
//
// Note [Attention dropout from a counter]
// The fused attention never stores its [L, S] probabilities, and a dropout mask of one byte each
// would be as large: its backward must drop the same probabilities without a stored byte mask.
// Each probability therefore draws from a counter-based hash of where it is: element
// e = (n * L + i) * S + j (batch entry n, query row i, key column j) is kept when 32-bit word e % 4
// of Philox block first_block + e / 4, as a uniform in [0, 1), is >= p. The forward reserves the
// blocks from the Generator, so the next random op draws fresh numbers; the GPU's forward and
// backward, the CPU forward and attention_dropout_mask all compute the same bits (the CPU backward
// reads the forward's, kept as bits: Note [Attention dropout bits] in core/cpu/attention.cpp).
#include <cstdint>

#include "core/host_device.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace sg::math {

inline constexpr int kMaxAttentionBatchDims = 6;

// The batch dims of one operand: matrix n (row-major over the batch dims) starts `offset(n)`
// elements after the operand's first element. A broadcast dim has stride 0.
struct AttentionBatch {
  int dims = 0;
  int64_t sizes[kMaxAttentionBatchDims] = {};
  int64_t strides[kMaxAttentionBatchDims] = {};

  SG_HOST_DEVICE int64_t offset(int64_t n) const {
    int64_t at = 0;
    for (int d = dims - 1; d >= 0; --d) {
      at += (n % sizes[d]) * strides[d];
      n /= sizes[d];
    }
    return at;
  }
};

// The batch dims (all but the last two) of `t`; the front has checked there are at most
// kMaxAttentionBatchDims of them.
inline AttentionBatch attention_batch(const Tensor& t) {
  AttentionBatch batch;
  batch.dims = static_cast<int>(t.dim()) - 2;
  for (int d = 0; d < batch.dims; ++d) {
    batch.sizes[d] = t.size(d);
    batch.strides[d] = t.stride(d);
  }
  return batch;
}

// Whether probability `element` survives dropout with probability p (Note [Attention dropout from
// a counter]): the definition. The CPU kernel computes the same bits sixteen blocks at a time into
// 64-bit words (core/cpu/attention.cpp); the GPU kernel and attention_dropout_mask call this.
SG_HOST_DEVICE inline bool attention_keep(uint64_t seed, uint64_t first_block, uint64_t element, float p) {
  return uniform_float(philox4x32_10(seed, first_block + element / 4).word[element % 4]) >= p;
}

}  // namespace sg::math
