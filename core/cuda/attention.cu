// The CUDA fused attention (contract: core/kernels/attention.h), built on cuBLAS.
//
// Note [CUDA attention through batched GEMMs]
// The CPU kernel walks the keys a block at a time and never holds a row of scores. On a GPU the
// products are the whole cost and only tensor cores make them fast, so this kernel hands them to
// cuBLAS as strided-batched GEMMs and keeps three small row kernels for the rest:
//   forward:  scores = Q K^T (opmath_t) -> softmax rows: masked, scaled, log-sum-exp, dropout
//             -> P (q's dtype) -> out = P V
//   backward: scores = Q K^T again -> P (opmath_t) and its dropped copy Z -> dV = Z^T dO;
//             dZ = dO V^T -> dS = scale P (factor dZ - delta) (q's dtype) -> dQ = dS K, dK = dS^T Q
// where delta_i = dO_i . O_i. 16-bit inputs keep f32 scores and accumulate every GEMM in f32; the
// probabilities and dS are rounded to 16 bits once, before the GEMMs that read them (as a
// tensor-core attention does). The [L, S] matrices are held for a group of batch entries at a time,
// at most kScoresBudget bytes of scores, so memory stays bounded however long the batch. Dropout
// draws the counter-based mask of Note [Attention dropout from a counter], so forward, backward and
// the CPU drop the same probabilities. Row kernels reduce in a fixed order and cuBLAS is asked for
// no atomics-based split, so a result has the same bits on every run.
#include <algorithm>
#include <cmath>

#include "core/attention_math.h"
#include "core/cuda/attention_kernels.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/gemm_kernels.h"
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg::cuda {

namespace {

constexpr int64_t kScoresBudget = int64_t(256) << 20;  // bytes of [L, S] opmath_t scores per group

// The mask, causality, scale and dropout of one call: what the row kernels apply to a score.
template <typename math_t>
struct ScoreRule {
  const void* mask;
  bool bool_mask;
  math::AttentionBatch mask_batch;
  int64_t mask_row_stride, mask_col_stride;
  int64_t L, S;
  math_t scale;
  bool causal;
  double dropout_p;
  uint64_t seed, first_block;

  // scale * (q_i . k_j), masked and offset as the contract says; `product` is q_i . k_j.
  template <typename scalar_t>
  __device__ math_t score(int64_t n, int64_t i, int64_t j, math_t product) const {
    if (causal && j > i) return -INFINITY;
    const math_t scaled = scale * product;
    if (mask != nullptr) {
      const int64_t at = mask_batch.offset(n) + i * mask_row_stride + j * mask_col_stride;
      if (bool_mask) return static_cast<const bool*>(mask)[at] ? scaled : math_t(-INFINITY);
      return scaled + static_cast<math_t>(static_cast<const scalar_t*>(mask)[at]);
    }
    return scaled;
  }
  // 0, or 1 / (1 - p): what dropout multiplies probability (n, i, j) by.
  __device__ math_t dropout_factor(int64_t n, int64_t i, int64_t j) const {
    if (dropout_p <= 0) return math_t(1);
    const uint64_t element = static_cast<uint64_t>((n * L + i) * S + j);
    return math::attention_keep(seed, first_block, element, static_cast<float>(dropout_p))
               ? static_cast<math_t>(1.0 / (1.0 - dropout_p))
               : math_t(0);
  }
};

template <typename math_t>
ScoreRule<math_t> rule_of(const Tensor& q, const Tensor& k, const AttentionArgs& args) {
  ScoreRule<math_t> rule{nullptr,     false,          {},         0,
                         0,           q.size(-2),     k.size(-2), static_cast<math_t>(args.scale),
                         args.causal, args.dropout_p, args.seed,  args.first_block};
  if (args.mask.defined()) {
    rule.mask = args.mask.raw_data();
    rule.bool_mask = args.mask.dtype() == DType::boolean;
    rule.mask_batch = math::attention_batch(args.mask);
    rule.mask_row_stride = args.mask.stride(-2);
    rule.mask_col_stride = args.mask.stride(-1);
  }
  return rule;
}

// The probability of a score from its row's log-sum-exp; 0 in a fully masked row.
template <typename math_t>
__device__ math_t probability(math_t score, math_t log_sum_exp) {
  return log_sum_exp == -INFINITY ? math_t(0) : exp(score - log_sum_exp);
}

// Forward, one row (n, i) of a group whose first batch entry is `first`: the softmax of the row's
// scores, its log-sum-exp, and the dropped probabilities Z = factor * P in q's dtype.
template <typename scalar_t>
struct SoftmaxRows {
  using math_t = opmath_t<scalar_t>;
  ScoreRule<math_t> rule;
  int64_t first;
  const math_t* products;  // [group, L, S]: q_i . k_j
  scalar_t* dropped;       // [group, L, S]
  math_t* log_sum_exp;     // [batch, L]: the whole call's

  template <bool kBlockPerRow>
  __device__ void row(int64_t row, RowThreads<kBlockPerRow> threads) const {
    const int64_t n = first + row / rule.L, i = row % rule.L, S = rule.S;
    const math_t* x = products + row * S;
    const auto score = [&](int64_t j) { return rule.template score<scalar_t>(n, i, j, x[j]); };
    const math_t max = threads.fold(S, math_t(-INFINITY), score, Max());
    math_t lse = -INFINITY;
    if (max != -INFINITY) {
      const math_t sum = threads.fold(
          S, math_t(0), [&](int64_t j) { return exp(score(j) - max); }, Plus());
      lse = max + log(sum);
    }
    for (int64_t j = threads.first(); j < S; j += threads.step())
      dropped[row * S + j] = static_cast<scalar_t>(probability(score(j), lse) * rule.dropout_factor(n, i, j));
    if (threads.leader()) log_sum_exp[n * rule.L + i] = lse;
  }
};

// Backward, one row: the probabilities again, in place of the products (opmath_t), and Z in q's dtype.
template <typename scalar_t>
struct ProbabilityRows {
  using math_t = opmath_t<scalar_t>;
  ScoreRule<math_t> rule;
  int64_t first;
  math_t* products;  // in: q_i . k_j; out: P_ij
  scalar_t* dropped;
  const math_t* log_sum_exp;

  template <bool kBlockPerRow>
  __device__ void row(int64_t row, RowThreads<kBlockPerRow> threads) const {
    const int64_t n = first + row / rule.L, i = row % rule.L, S = rule.S;
    const math_t lse = log_sum_exp[n * rule.L + i];
    for (int64_t j = threads.first(); j < S; j += threads.step()) {
      const math_t p = probability(rule.template score<scalar_t>(n, i, j, products[row * S + j]), lse);
      products[row * S + j] = p;
      dropped[row * S + j] = static_cast<scalar_t>(p * rule.dropout_factor(n, i, j));
    }
  }
};

// Backward, one row: dS_ij = scale * P_ij * (factor_ij * dZ_ij - delta_i), in q's dtype.
template <typename scalar_t>
struct ScoreGradientRows {
  using math_t = opmath_t<scalar_t>;
  ScoreRule<math_t> rule;
  int64_t first;
  const math_t* probs;
  const math_t* grad_dropped;  // dZ = dO V^T
  const math_t* delta;         // [batch, L]
  scalar_t* grad_scores;

  template <bool kBlockPerRow>
  __device__ void row(int64_t row, RowThreads<kBlockPerRow> threads) const {
    const int64_t n = first + row / rule.L, i = row % rule.L, S = rule.S;
    const math_t d = delta[n * rule.L + i];
    for (int64_t j = threads.first(); j < S; j += threads.step()) {
      const int64_t at = row * S + j;
      grad_scores[at] =
          static_cast<scalar_t>(rule.scale * probs[at] * (rule.dropout_factor(n, i, j) * grad_dropped[at] - d));
    }
  }
};

// delta_i = dO_i . O_i, one thread per row of every matrix.
template <typename scalar_t>
__global__ void delta_kernel(const scalar_t* grad_out, const scalar_t* out, int64_t rows, int64_t Ev,
                             opmath_t<scalar_t>* delta) {
  using math_t = opmath_t<scalar_t>;
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  math_t total = 0;
  for (int64_t c = 0; c < Ev; ++c)
    total += static_cast<math_t>(grad_out[row * Ev + c]) * static_cast<math_t>(out[row * Ev + c]);
  delta[row] = total;
}

int64_t matrix_count(const Tensor& t) {
  int64_t count = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) count *= t.size(d);
  return count;
}

// Batch entries [first, first + count) of a contiguous [batch..., rows, cols] tensor as a
// [count, rows, cols] view, or as its transpose [count, cols, rows] (a view: no copy).
Tensor matrices(const Tensor& t, int64_t first, int64_t count, bool transposed = false) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  Shape sizes{count, rows, cols}, strides{rows * cols, cols, 1};
  if (transposed) {
    std::swap(sizes[1], sizes[2]);
    std::swap(strides[1], strides[2]);
  }
  return Tensor(std::make_shared<TensorImpl>(t.storage(), t.storage_offset() + first * rows * cols, std::move(sizes),
                                             std::move(strides), t.dtype()));
}

// How many batch entries share one group of [L, S] buffers.
int64_t group_size(int64_t matrices, int64_t L, int64_t S, size_t math_bytes) {
  const int64_t per_matrix = std::max<int64_t>(1, L * S * static_cast<int64_t>(math_bytes));
  return std::clamp<int64_t>(kScoresBudget / per_matrix, 1, std::max<int64_t>(matrices, 1));
}

template <typename scalar_t>
void forward_typed(const Tensor& out, const Tensor& log_sum_exp, const Tensor& q_in, const Tensor& k_in,
                   const Tensor& v_in, const AttentionArgs& args) {
  using math_t = opmath_t<scalar_t>;
  const Tensor q = kernels::contiguous(q_in), k = kernels::contiguous(k_in), v = kernels::contiguous(v_in);
  const ScoreRule<math_t> rule = rule_of<math_t>(q, k, args);
  const int64_t batch = matrix_count(q), L = rule.L, S = rule.S;
  const int64_t group = group_size(batch, L, S, sizeof(math_t));
  const Device device = q.device();
  const Tensor products = empty({group, L, S}, {log_sum_exp.dtype(), device});
  const Tensor dropped = empty({group, L, S}, {q.dtype(), device});
  for (int64_t first = 0; first < batch; first += group) {
    const int64_t count = std::min(group, batch - first);
    const Tensor x = products.narrow(0, 0, count), z = dropped.narrow(0, 0, count);
    gemm(x, matrices(q, first, count), matrices(k, first, count, true), 1.0, 0.0);
    launch_rows(
        count * L, S, true,
        SoftmaxRows<scalar_t>{rule, first, static_cast<const math_t*>(x.raw_data()),
                              static_cast<scalar_t*>(z.raw_data()), static_cast<math_t*>(log_sum_exp.raw_data())});
    SG_CUDA_CHECK_LAUNCH();
    gemm(matrices(out, first, count), z, matrices(v, first, count), 1.0, 0.0);
  }
}

template <typename scalar_t>
void backward_typed(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                    const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& out,
                    const Tensor& log_sum_exp, const AttentionArgs& args) {
  using math_t = opmath_t<scalar_t>;
  const Tensor q = kernels::contiguous(q_in), k = kernels::contiguous(k_in), v = kernels::contiguous(v_in);
  const ScoreRule<math_t> rule = rule_of<math_t>(q, k, args);
  const int64_t batch = matrix_count(q), L = rule.L, S = rule.S, Ev = v.size(-1);
  const Device device = q.device();
  const Tensor delta = empty(log_sum_exp.sizes(), {log_sum_exp.dtype(), device});
  const int64_t rows = batch * L;
  if (rows > 0) {
    delta_kernel<scalar_t><<<static_cast<unsigned>((rows + 255) / 256), 256, 0, compute_stream()>>>(
        static_cast<const scalar_t*>(grad_out.raw_data()), static_cast<const scalar_t*>(out.raw_data()), rows, Ev,
        static_cast<math_t*>(delta.raw_data()));
    SG_CUDA_CHECK_LAUNCH();
  }
  const int64_t group = group_size(batch, L, S, sizeof(math_t));
  const Tensor probs = empty({group, L, S}, {log_sum_exp.dtype(), device});
  const Tensor grad_dropped = empty({group, L, S}, {log_sum_exp.dtype(), device});
  const Tensor dropped = empty({group, L, S}, {q.dtype(), device});  // Z, then dS
  const auto* lse = static_cast<const math_t*>(log_sum_exp.raw_data());
  for (int64_t first = 0; first < batch; first += group) {
    const int64_t count = std::min(group, batch - first);
    const Tensor p = probs.narrow(0, 0, count), dz = grad_dropped.narrow(0, 0, count);
    const Tensor z = dropped.narrow(0, 0, count);
    const Tensor q_n = matrices(q, first, count), k_n = matrices(k, first, count), v_n = matrices(v, first, count);
    const Tensor g_n = matrices(grad_out, first, count);
    gemm(p, q_n, matrices(k, first, count, true), 1.0, 0.0);
    launch_rows(count * L, S, true,
                ProbabilityRows<scalar_t>{rule, first, static_cast<math_t*>(p.raw_data()),
                                          static_cast<scalar_t*>(z.raw_data()), lse});
    SG_CUDA_CHECK_LAUNCH();
    gemm(matrices(grad_v, first, count), matrices(z, 0, count, true), g_n, 1.0, 0.0);
    gemm(dz, g_n, matrices(v, first, count, true), 1.0, 0.0);
    launch_rows(count * L, S, true,
                ScoreGradientRows<scalar_t>{
                    rule, first, static_cast<const math_t*>(p.raw_data()), static_cast<const math_t*>(dz.raw_data()),
                    static_cast<const math_t*>(delta.raw_data()), static_cast<scalar_t*>(z.raw_data())});
    SG_CUDA_CHECK_LAUNCH();
    gemm(matrices(grad_q, first, count), z, k_n, 1.0, 0.0);
    gemm(matrices(grad_k, first, count), matrices(z, 0, count, true), q_n, 1.0, 0.0);
  }
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionArgs& args) {
  const DeviceGuard guard(q.device().index);
  SG_DISPATCH_FLOATING(q.dtype(), "scaled_dot_product_attention",
                       [&]<typename scalar_t>() { forward_typed<scalar_t>(out, log_sum_exp, q, k, v, args); });
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const AttentionArgs& args) {
  const DeviceGuard guard(q.device().index);
  SG_DISPATCH_FLOATING(q.dtype(), "scaled_dot_product_attention", [&]<typename scalar_t>() {
    backward_typed<scalar_t>(grad_q, grad_k, grad_v, grad_out, q, k, v, out, log_sum_exp, args);
  });
}

}  // namespace sg::cuda
