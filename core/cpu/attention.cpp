// The CPU fused attention, in the style of FlashAttention-2 (docs/attention.md explains the
// algorithm). The forward takes one block of query rows at a time and walks the key columns in
// blocks: a block's scores come from one small GEMM, the softmax is folded in online (a running max
// and a running sum per row, the partial output rescaled when the max grows), and a second GEMM adds
// the block's probabilities times its values into the output. Only the per-row log-sum-exp is kept
// for the backward, which recomputes each block's probabilities from it, and with dropout one bit
// per probability (Note [Attention dropout bits]). Key blocks wholly above the causal diagonal are
// never touched.
//
// Note [Attention dropout bits]
// The forward draws each probability's keep decision (math::attention_keep's bits, Note [Attention
// dropout from a counter] in core/attention_math.h) once, 64 at a time into one 64-bit word per
// (query row, key block), and writes the words to dropout_keep, [batch..., L, ceil(S / 64)] i64,
// which autograd keeps next to log_sum_exp; the backward reads them instead of drawing again, which
// cost it as many Philox draws as the forward. That is S / 8 bytes per query row: 0.4 MB per layer
// at gpt-mini's (32, 6, 128, 128). Words the forward does not visit (above the causal diagonal)
// are never read; a row block whose keys were all masked so far stores 0, and so do the keys after
// the diagonal: their probabilities are 0 whatever the bit. The CUDA kernel does not store them
// and draws again from the seed.
//
// The GEMMs are the BLAS library's (cpu::blas_sgemm / blas_dgemm on 64 x 64 blocks: measured 3.5-4.5x
// faster than the plain loop below, which runs only where OpenBLAS is not available; docs/performance.md).
// 16-bit inputs are widened to f32 one block at a time, and f32 / f64 blocks are handed to BLAS
// where they lie, through their strides. Work runs in parallel over (batch entry, query block) in
// the forward and over batch entries in the backward, where each entry owns its gradients (no
// two threads ever add into the same element, so the result does not depend on the thread count);
// threads claim items one at a time (for_each_item).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/attention_math.h"
#include "core/cpu/attention_kernels.h"
#include "core/cpu/blas.h"
#include "core/cpu/philox_batch.h"
#include "core/parallel.h"
#include "core/simd_math.h"

namespace sg::cpu {

namespace {

constexpr int64_t kQueryBlock = 64, kKeyBlock = 64;

// exp in the compute type: f32 branch-free, so that the softmax loops vectorise (std::exp is one
// libm call per element, which does not); f64 (gradcheck) the C library's. Note [Branch-free
// float math] in core/simd_math.h.
using math::exp_of;

// The max and the sum of a row, each kept in kLanes independent lanes that are combined at the
// end: the compiler vectorises a fixed set of lanes, but not one running value (for a sum, that
// would reorder float additions, which it may not do on its own). The order depends only on n.
constexpr int64_t kLanes = 8;

template <typename T>
T row_max(const T* x, int64_t n) {
  T lanes[kLanes];
  std::fill_n(lanes, kLanes, -std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], x[j + l]);
  for (; j < n; ++j) lanes[0] = std::max(lanes[0], x[j]);
  return *std::max_element(lanes, lanes + kLanes);
}

template <typename T>
T row_sum(const T* x, int64_t n) {
  T lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += x[j + l];
  for (; j < n; ++j) lanes[0] += x[j];
  T total = 0;
  for (int64_t l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// The dot product of two rows, in kLanes lanes as row_sum: one running total would make every
// addition wait for the one before (a chain of Ev additions per row, which took a third of the
// backward's own time at gpt-mini's head size of 32).
template <typename math_t, typename scalar_t>
math_t row_dot(const scalar_t* a, const scalar_t* b, int64_t n) {
  math_t lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<math_t>(a[j + l]) * static_cast<math_t>(b[j + l]);
  for (; j < n; ++j) lanes[0] += static_cast<math_t>(a[j]) * static_cast<math_t>(b[j]);
  math_t total = 0;
  for (int64_t l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// body(j, factor) for j < n <= 64, factor what dropout multiplies probability j by: 1 / (1 - p)
// where bit j of `keep` is set, 0 where it is not. The bits are taken 16 at a time into a 32-bit
// word, whose shift by a different count per lane vectorises into 32-bit lanes, and the bit is
// multiplied in as a float, without a branch (`keep >> j & 1 ? scale : 0` over the 64-bit word, in
// a pass of its own, took about 5% of a pass at gpt-mini's shape in perf; docs/performance.md).
template <typename T, typename Body>
void for_each_dropout_factor(uint64_t keep, T kept_scale, int64_t n, Body body) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const uint32_t bits = static_cast<uint32_t>(keep >> j0 & 0xFFFF);
    const int64_t count = std::min<int64_t>(16, n - j0);
    for (int64_t l = 0; l < count; ++l) body(j0 + l, static_cast<T>(bits >> l & 1u) * kept_scale);
  }
}

// Row-major C[m, n] = alpha op(A) op(B) + beta C for the small blocks of the kernel.
template <typename T>
void block_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (blas_available()) {
    if constexpr (std::is_same_v<T, float>)
      blas_sgemm(trans_a, trans_b, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
    else blas_dgemm(trans_a, trans_b, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
    return;
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const T a_ip = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += a_ip * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
    }
}

// A batch of matrices reached through strides; their last dim has a unit stride. element_t is
// const for what the kernel reads and not for what it writes: out and the gradients lie where the
// front put them, in the layout of the heads' views (Note [Attention in the layout of its inputs]
// in autograd/ops_attention.cpp).
template <typename element_t>
struct Matrices {
  element_t* data;
  math::AttentionBatch batch;
  int64_t row_stride;
  element_t* row(int64_t n, int64_t r) const { return data + batch.offset(n) + r * row_stride; }
};
template <typename element_t>
Matrices<element_t> matrices_of(const Tensor& t) {
  return {static_cast<element_t*>(t.raw_data()), math::attention_batch(t), t.stride(-2)};
}

// rows x width math_t values, `ld` apart, written to rows of `to`, converted to its type.
template <typename scalar_t, typename math_t>
void store_rows(const math_t* from, int64_t ld, int64_t rows, int64_t width, const Matrices<scalar_t>& to, int64_t n,
                int64_t first) {
  for (int64_t r = 0; r < rows; ++r) {
    scalar_t* row = to.row(n, first + r);
    for (int64_t c = 0; c < width; ++c) row[c] = static_cast<scalar_t>(from[r * ld + c]);
  }
}

// The number of matrices in a batch: the product of all but the last two dims.
int64_t matrix_count(const Tensor& t) {
  int64_t count = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) count *= t.size(d);
  return count;
}

// Rows of a matrix as math_t, `ld` apart, ready for BLAS.
template <typename math_t>
struct Block {
  const math_t* data;
  int64_t ld;
};

// Rows [first, first + count) of matrix n, `width` wide: where they lie when they already are math_t
// rows BLAS can read, otherwise converted into `scratch`.
template <typename math_t, typename scalar_t>
Block<math_t> rows_of(const Matrices<const scalar_t>& x, int64_t n, int64_t first, int64_t count, int64_t width,
                      std::vector<math_t>& scratch) {
  const scalar_t* start = x.row(n, first);
  if constexpr (std::is_same_v<scalar_t, math_t>)
    if (x.row_stride >= std::max<int64_t>(width, 1)) return {start, x.row_stride};
  for (int64_t r = 0; r < count; ++r)
    for (int64_t c = 0; c < width; ++c) scratch[r * width + c] = static_cast<math_t>(start[r * x.row_stride + c]);
  return {scratch.data(), std::max<int64_t>(width, 1)};
}

// Everything both passes need to know about one attention call.
template <typename scalar_t>
struct Problem {
  using math_t = opmath_t<scalar_t>;
  Matrices<const scalar_t> q, k, v;
  const void* mask = nullptr;  // bool or scalar_t, or none
  bool bool_mask = false;
  math::AttentionBatch mask_batch;
  int64_t mask_row_stride = 0, mask_col_stride = 0;
  int64_t L, S, E, Ev;
  int64_t words_per_row;  // of the dropout bits: one word per key block
  math_t scale;
  bool causal;
  double dropout_p;
  uint64_t seed, first_block;

  Problem(const Tensor& q_, const Tensor& k_, const Tensor& v_, const AttentionArgs& args)
      : q(matrices_of<const scalar_t>(q_)),
        k(matrices_of<const scalar_t>(k_)),
        v(matrices_of<const scalar_t>(v_)),
        L(q_.size(-2)),
        S(k_.size(-2)),
        E(q_.size(-1)),
        Ev(v_.size(-1)),
        words_per_row(attention_dropout_words(S)),
        scale(static_cast<math_t>(args.scale)),
        causal(args.causal),
        dropout_p(args.dropout_p),
        seed(args.seed),
        first_block(args.first_block) {
    if (args.mask.defined()) {
      mask = args.mask.raw_data();
      bool_mask = args.mask.dtype() == DType::boolean;
      mask_batch = math::attention_batch(args.mask);
      mask_row_stride = args.mask.stride(-2);
      mask_col_stride = args.mask.stride(-1);
    }
  }

  // Query rows r0 .. r0 + rows - 1 look at keys 0 .. key_end - 1: all of them, or up to the last
  // row's diagonal with causal (the blocks beyond are skipped, not masked).
  int64_t key_end(int64_t r0, int64_t rows) const { return causal ? std::min(S, r0 + rows) : S; }

  // Of keys c0 .. c0 + cols - 1, how many query row i sees before the causal diagonal (all of
  // them without causal).
  int64_t keys_seen(int64_t i, int64_t c0, int64_t cols) const {
    return causal ? std::clamp<int64_t>(i + 1 - c0, 0, cols) : cols;
  }

  // Where the work per score (exp, dropout, the softmax's gradient) of such a row can stop: the
  // keys seen, rounded up to whole vectors of kVector scores. The scores between are masked, so
  // they compute the 0 they must be; past this end the row is set to 0. On the blocks the
  // diagonal crosses that is about half the work (a third of it at T = 128 with 64 x 64 blocks),
  // and loops of whole vectors have no scalar tail. kVector is a multiple of kLanes: row_max and
  // row_sum give the bits they give over the whole row.
  static constexpr int64_t kVector = 16;
  int64_t work_end(int64_t i, int64_t c0, int64_t cols) const {
    return std::min(cols, (keys_seen(i, c0, cols) + kVector - 1) / kVector * kVector);
  }

  // s[r * kKeyBlock + j] = the score of query r0 + r and key c0 + j of matrix n: scale * q . k,
  // then -inf where masked, plus a float mask.
  void scores(int64_t n, Block<math_t> qb, Block<math_t> kb, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
              math_t* s) const {
    constexpr math_t kMasked = -std::numeric_limits<math_t>::infinity();
    block_gemm<math_t>(false, true, rows, cols, E, scale, qb.data, qb.ld, kb.data, kb.ld, math_t(0), s, kKeyBlock);
    const int64_t mask_start = mask ? mask_batch.offset(n) + c0 * mask_col_stride : 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r0 + r;
      math_t* row = s + r * kKeyBlock;
      if (bool_mask) {
        const bool* keep = static_cast<const bool*>(mask) + mask_start + i * mask_row_stride;
        for (int64_t j = 0; j < cols; ++j) row[j] = keep[j * mask_col_stride] ? row[j] : kMasked;
      } else if (mask) {
        const scalar_t* add = static_cast<const scalar_t*>(mask) + mask_start + i * mask_row_stride;
        for (int64_t j = 0; j < cols; ++j) row[j] += static_cast<math_t>(add[j * mask_col_stride]);
      }
      if (causal)
        for (int64_t j = std::max<int64_t>(0, i + 1 - c0); j < cols; ++j) row[j] = kMasked;
    }
  }

  // Bit j: whether probability (n, i, c0 + j) survives dropout, for j < drawn <= 64 (0 beyond). The
  // bits are math::attention_keep's, drawn sixteen Philox blocks (64 probabilities) at a time by
  // cpu::philox_batch; a row that does not start on a block's first word takes its bits from two
  // batches. Only the forward draws (Note [Attention dropout bits]).
  uint64_t keep_bits(int64_t n, int64_t i, int64_t c0, int64_t drawn) const {
    const float keep_below = static_cast<float>(dropout_p);
    const uint64_t first = static_cast<uint64_t>((n * L + i) * S + c0);
    uint64_t bits = 0;
    for (int64_t j = 0; j < drawn;) {
      const uint64_t block = (first + static_cast<uint64_t>(j)) / 4;  // the batch's first, after first_block
      const int64_t at = static_cast<int64_t>(first + static_cast<uint64_t>(j) - 4 * block);  // j's place in it
      bits |= (keep_bits_of(philox_batch(seed, first_block + block), keep_below) >> at) << j;
      j += 4 * kPhiloxBatch - at;
    }
    return drawn == 64 ? bits : bits & ((uint64_t(1) << drawn) - 1);
  }

  // Bit 4 l + w: whether word w of block l of the batch is kept, i.e. the batch's 64 probabilities in
  // element order. A loop over the blocks compares their four words with unit stride into a nibble
  // per block, a second shifts the nibbles into place: both vectorise, and together cost about a
  // fifth of the Philox draws, where float factors interleaved into element order and copied out
  // cost more than the draws.
  static uint64_t keep_bits_of(const PhiloxBatch& batch, float keep_below) {
    static_assert(4 * kPhiloxBatch == kKeyBlock, "a batch's 64 decisions fill one word");
    uint32_t nibble[kPhiloxBatch];
    for (int l = 0; l < kPhiloxBatch; ++l)
      nibble[l] = static_cast<uint32_t>(
          (uniform_float(batch.word[0][l]) >= keep_below) | (uniform_float(batch.word[1][l]) >= keep_below) << 1 |
          (uniform_float(batch.word[2][l]) >= keep_below) << 2 | (uniform_float(batch.word[3][l]) >= keep_below) << 3);
    uint64_t bits = 0;
    for (int l = 0; l < kPhiloxBatch; ++l) bits |= static_cast<uint64_t>(nibble[l]) << (4 * l);
    return bits;
  }

  // What dropout multiplies a kept probability by: 1 / (1 - p), or 0 when p = 1, where nothing
  // is kept and the dropped probabilities' 0 x inf would be NaN.
  math_t kept_scale() const { return dropout_p < 1 ? static_cast<math_t>(1.0 / (1.0 - dropout_p)) : math_t(0); }
};

// Forward of query rows [r0, r0 + rows) of matrix n: out rows and their log-sum-exp.
template <typename scalar_t>
struct ForwardBlock {
  using math_t = opmath_t<scalar_t>;
  std::vector<math_t> q, k, v, s, acc, max, sum;
  explicit ForwardBlock(const Problem<scalar_t>& p)
      : q(kQueryBlock * p.E),
        k(kKeyBlock * p.E),
        v(kKeyBlock * p.Ev),
        s(kQueryBlock * kKeyBlock),
        acc(kQueryBlock * p.Ev),
        max(kQueryBlock),
        sum(kQueryBlock) {}

  // keep_words: the dropout bits of rows r0 .. (Note [Attention dropout bits]), or null without dropout.
  void run(const Problem<scalar_t>& p, int64_t n, int64_t r0, int64_t rows, const Matrices<scalar_t>& out,
           math_t* log_sum_exp, uint64_t* keep_words) {
    constexpr math_t kNone = -std::numeric_limits<math_t>::infinity();
    const Block<math_t> qb = rows_of(p.q, n, r0, rows, p.E, q);
    std::fill_n(max.begin(), rows, kNone);
    std::fill_n(sum.begin(), rows, math_t(0));
    std::fill_n(acc.begin(), rows * p.Ev, math_t(0));
    for (int64_t c0 = 0; c0 < p.key_end(r0, rows); c0 += kKeyBlock) {
      const int64_t cols = std::min(kKeyBlock, p.key_end(r0, rows) - c0);
      p.scores(n, qb, rows_of(p.k, n, c0, cols, p.E, k), r0, rows, c0, cols, s.data());
      for (int64_t r = 0; r < rows; ++r) {
        math_t* row = s.data() + r * kKeyBlock;
        const int64_t end = p.work_end(r0 + r, c0, cols);
        // Online softmax: with the new running max m', the old sum and output were computed
        // against m, so both are multiplied by exp(m - m') before this block's terms are added.
        const math_t new_max = std::max(max[r], row_max(row, end));
        uint64_t* keep = keep_words ? keep_words + r * p.words_per_row + c0 / kKeyBlock : nullptr;
        if (new_max == kNone) {  // every key so far masked: nothing to add, nothing to keep
          std::fill_n(row, cols, math_t(0));
          if (keep) *keep = 0;
          continue;
        }
        for (int64_t j = 0; j < end; ++j) row[j] = exp_of(row[j] - new_max);
        std::fill(row + end, row + cols, math_t(0));
        const math_t rescale = exp_of(max[r] - new_max);  // 0 on the first block with a finite max
        sum[r] = sum[r] * rescale + row_sum(row, end);
        max[r] = new_max;
        if (rescale != math_t(1))
          for (int64_t c = 0; c < p.Ev; ++c) acc[r * p.Ev + c] *= rescale;
        if (keep) {  // the sum above is of the kept and the dropped: dropout acts after softmax
          // Keys after the diagonal have probability 0 whatever the draw: not drawn.
          *keep = p.keep_bits(n, r0 + r, c0, p.keys_seen(r0 + r, c0, cols));
          for_each_dropout_factor(*keep, p.kept_scale(), end, [row](int64_t j, math_t factor) { row[j] *= factor; });
        }
      }
      const Block<math_t> vb = rows_of(p.v, n, c0, cols, p.Ev, v);
      block_gemm<math_t>(false, false, rows, p.Ev, cols, math_t(1), s.data(), kKeyBlock, vb.data, vb.ld, math_t(1),
                         acc.data(), p.Ev);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const bool empty = sum[r] == math_t(0);  // a fully masked row: output 0, as PyTorch
      const math_t inverse = empty ? math_t(0) : math_t(1) / sum[r];
      scalar_t* out_row = out.row(n, r0 + r);
      for (int64_t c = 0; c < p.Ev; ++c) out_row[c] = static_cast<scalar_t>(acc[r * p.Ev + c] * inverse);
      log_sum_exp[r] = empty ? kNone : max[r] + std::log(sum[r]);
    }
  }
};

// Backward of matrix n: its whole dq, dk, dv.
template <typename scalar_t>
struct BackwardMatrix {
  using math_t = opmath_t<scalar_t>;
  std::vector<math_t> q, g, k, v, s, dp, z, dk, dv, dq, delta;
  explicit BackwardMatrix(const Problem<scalar_t>& p)
      : q(kQueryBlock * p.E),
        g(kQueryBlock * p.Ev),
        k(kKeyBlock * p.E),
        v(kKeyBlock * p.Ev),
        s(kQueryBlock * kKeyBlock),
        dp(kQueryBlock * kKeyBlock),
        z(kQueryBlock * kKeyBlock),
        dk(kKeyBlock * p.E),
        dv(kKeyBlock * p.Ev),
        dq(p.L * p.E),
        delta(p.L) {}

  // Matrix n of grad_out and out ([L, Ev]), log_sum_exp ([L]), the forward's dropout bits (L rows of
  // words_per_row, or null without dropout), grad_q ([L, E]), grad_k ([S, E]) and grad_v ([S, Ev]).
  void run(const Problem<scalar_t>& p, int64_t n, const Matrices<const scalar_t>& grad_out,
           const Matrices<const scalar_t>& out, const math_t* log_sum_exp, const uint64_t* keep_words,
           const Matrices<scalar_t>& grad_q, const Matrices<scalar_t>& grad_k, const Matrices<scalar_t>& grad_v) {
    // delta_i = sum_j p_ij dp_ij = dO_i . O_i: the term softmax's backward subtracts, one per row.
    for (int64_t i = 0; i < p.L; ++i) delta[i] = row_dot<math_t>(grad_out.row(n, i), out.row(n, i), p.Ev);
    std::fill(dq.begin(), dq.end(), math_t(0));
    for (int64_t c0 = 0; c0 < p.S; c0 += kKeyBlock) {
      const int64_t cols = std::min(kKeyBlock, p.S - c0);
      const Block<math_t> kb = rows_of(p.k, n, c0, cols, p.E, k), vb = rows_of(p.v, n, c0, cols, p.Ev, v);
      std::fill(dk.begin(), dk.end(), math_t(0));
      std::fill(dv.begin(), dv.end(), math_t(0));
      // With causal, query blocks that end before key c0 see none of this block's keys.
      for (int64_t r0 = p.causal ? c0 / kQueryBlock * kQueryBlock : 0; r0 < p.L; r0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, p.L - r0);
        const Block<math_t> qb = rows_of(p.q, n, r0, rows, p.E, q), gb = rows_of(grad_out, n, r0, rows, p.Ev, g);
        p.scores(n, qb, kb, r0, rows, c0, cols, s.data());
        block_gemm<math_t>(false, true, rows, cols, p.Ev, math_t(1), gb.data, gb.ld, vb.data, vb.ld, math_t(0),
                           dp.data(), kKeyBlock);  // dZ = dO V^T
        const math_t kept_scale = p.kept_scale();
        const math_t* probabilities_used = keep_words ? z.data() : s.data();  // Z = dropout(P), or P
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = r0 + r;
          math_t* prob = s.data() + r * kKeyBlock;
          math_t* grad = dp.data() + r * kKeyBlock;
          // P = exp(score - log_sum_exp), recomputed; a fully masked row has log_sum_exp -inf, P 0
          // and no gradient.
          const math_t lse = log_sum_exp[i], row_delta = delta[i];
          math_t* kept = keep_words ? z.data() + r * kKeyBlock : nullptr;
          // Scores past the row's diagonal (or all of them, for a fully masked row) get P = 0
          // and no gradient.
          const int64_t end = lse == -std::numeric_limits<math_t>::infinity() ? 0 : p.work_end(i, c0, cols);
          if (keep_words) {
            // Z = dropout(P), dP = dropout(dZ) with the forward's bits, and d score = P * (dP -
            // delta), softmax's backward, in one pass over the row.
            const uint64_t keep = keep_words[i * p.words_per_row + c0 / kKeyBlock];
            for_each_dropout_factor(keep, kept_scale, end, [&](int64_t j, math_t factor) {
              prob[j] = exp_of(prob[j] - lse);
              kept[j] = prob[j] * factor;
              grad[j] = prob[j] * (grad[j] * factor - row_delta);
            });
            std::fill(kept + end, kept + cols, math_t(0));
          } else {
            for (int64_t j = 0; j < end; ++j) {
              prob[j] = exp_of(prob[j] - lse);
              grad[j] = prob[j] * (grad[j] - row_delta);
            }
          }
          std::fill(prob + end, prob + cols, math_t(0));
          std::fill(grad + end, grad + cols, math_t(0));
        }
        // dV += Z^T dO, dQ += scale dS K, dK += scale dS^T Q
        block_gemm<math_t>(true, false, cols, p.Ev, rows, math_t(1), probabilities_used, kKeyBlock, gb.data, gb.ld,
                           math_t(1), dv.data(), p.Ev);
        block_gemm<math_t>(false, false, rows, p.E, cols, p.scale, dp.data(), kKeyBlock, kb.data, kb.ld, math_t(1),
                           dq.data() + r0 * p.E, p.E);
        block_gemm<math_t>(true, false, cols, p.E, rows, p.scale, dp.data(), kKeyBlock, qb.data, qb.ld, math_t(1),
                           dk.data(), p.E);
      }
      store_rows(dk.data(), p.E, cols, p.E, grad_k, n, c0);
      store_rows(dv.data(), p.Ev, cols, p.Ev, grad_v, n, c0);
    }
    store_rows(dq.data(), p.E, p.L, p.E, grad_q, n, 0);
  }
};

// Calls run(work, item) for items 0 .. count - 1 on the pool's threads, each thread with its own
// Work (its scratch buffers) taking the next unclaimed item until none is left. A thread that runs
// slower — its items cost more, or another process shares its core — simply takes fewer, where a
// fixed split would wait for the slowest thread's share. Each item writes only its own outputs, so who takes which item
// does not change a bit.
template <typename Work, typename Problem, typename Run>
void for_each_item(int64_t count, const Problem& p, Run run) {
  std::atomic<int64_t> next{0};
  parallel_for(std::min<int64_t>(count, get_num_threads()), 1, [&](int64_t, int64_t) {
    Work work(p);
    for (int64_t item = next++; item < count; item = next++) run(work, item);
  });
}

// The dropout bits' words, or null without dropout.
uint64_t* keep_words_of(const Tensor& dropout_keep, const AttentionArgs& args) {
  if (args.dropout_p == 0) return nullptr;
  SG_CHECK(dropout_keep.defined() && dropout_keep.dtype() == DType::i64 && dropout_keep.is_contiguous(),
           "scaled_dot_product_attention: the CPU kernel with dropout needs its dropout_keep bits (contiguous i64)");
  return static_cast<uint64_t*>(dropout_keep.raw_data());
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& dropout_keep, const Tensor& q,
                       const Tensor& k, const Tensor& v, const AttentionArgs& args) {
  SG_DISPATCH_FLOATING(q.dtype(), "scaled_dot_product_attention", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const Problem<scalar_t> p(q, k, v, args);
    const int64_t matrices = matrix_count(q);
    const int64_t blocks = (p.L + kQueryBlock - 1) / kQueryBlock;
    const Matrices<scalar_t> out_matrices = matrices_of<scalar_t>(out);
    math_t* lse_data = static_cast<math_t*>(log_sum_exp.raw_data());
    uint64_t* keep_words = keep_words_of(dropout_keep, args);
    // The last query blocks first: with causal they see the most keys, and the cheap ones at the
    // end even out the threads' finishing times.
    for_each_item<ForwardBlock<scalar_t>>(matrices * blocks, p, [&](ForwardBlock<scalar_t>& block, int64_t item) {
      const int64_t n = item % matrices, r0 = (blocks - 1 - item / matrices) * kQueryBlock;
      block.run(p, n, r0, std::min(kQueryBlock, p.L - r0), out_matrices, lse_data + n * p.L + r0,
                keep_words ? keep_words + (n * p.L + r0) * p.words_per_row : nullptr);
    });
  });
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const Tensor& dropout_keep, const AttentionArgs& args) {
  SG_DISPATCH_FLOATING(q.dtype(), "scaled_dot_product_attention", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const Problem<scalar_t> p(q, k, v, args);
    const int64_t matrices = matrix_count(q);
    const auto g = matrices_of<const scalar_t>(grad_out);
    const auto o = matrices_of<const scalar_t>(out);
    const auto dq = matrices_of<scalar_t>(grad_q);
    const auto dk = matrices_of<scalar_t>(grad_k);
    const auto dv = matrices_of<scalar_t>(grad_v);
    const math_t* lse_data = static_cast<const math_t*>(log_sum_exp.raw_data());
    const uint64_t* keep_words = keep_words_of(dropout_keep, args);
    for_each_item<BackwardMatrix<scalar_t>>(matrices, p, [&](BackwardMatrix<scalar_t>& work, int64_t n) {
      work.run(p, n, g, o, lse_data + n * p.L, keep_words ? keep_words + n * p.L * p.words_per_row : nullptr, dq, dk,
               dv);
    });
  });
}

void attention_dropout_keep(const Tensor& keep, const AttentionArgs& args) {
  bool* data = keep.data_ptr<bool>();
  const float p = static_cast<float>(args.dropout_p);
  parallel_for(keep.numel(), kParallelGrain / 8, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e)
      data[e] = math::attention_keep(args.seed, args.first_block, static_cast<uint64_t>(e), p);
  });
}

}  // namespace sg::cpu
