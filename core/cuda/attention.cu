// The CUDA fused attention (contract: core/kernels/attention.h), written to be simple and correct
// rather than fast: one thread per query row (forward, dq) or per key column (dk, dv), a block of
// kThreads neighbouring rows or columns, and the other operand's rows staged through shared memory
// a tile at a time, so every element loaded from global memory is used by the whole block. The
// forward is the CPU kernel's online softmax, tile by tile; the backward recomputes each
// probability from the saved log-sum-exp in two passes (the dq pass over query rows, the dk / dv
// pass over key columns), so no two threads ever add into the same gradient element: no atomics,
// and the result does not depend on scheduling. Math runs in opmath_t, as on the CPU.
#include <cmath>

#include "core/attention_math.h"
#include "core/cuda/attention_kernels.h"
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg::cuda {

namespace {

constexpr int kThreads = 32;  // query rows (or key columns) per block
constexpr int kTile = 16;     // rows of the other operand per shared-memory tile

template <typename scalar_t>
struct Matrices {
  const scalar_t* data;
  math::AttentionBatch batch;
  int64_t row_stride;
  __device__ const scalar_t* row(int64_t n, int64_t i) const { return data + batch.offset(n) + i * row_stride; }
};
template <typename scalar_t>
Matrices<scalar_t> matrices_of(const Tensor& t) {
  return {static_cast<const scalar_t*>(t.raw_data()), math::attention_batch(t), t.stride(-2)};
}

// What every kernel reads: the operands, the mask and the scalar arguments.
template <typename scalar_t>
struct Problem {
  using math_t = opmath_t<scalar_t>;
  Matrices<scalar_t> q, k, v;
  const void* mask;
  bool bool_mask;
  math::AttentionBatch mask_batch;
  int64_t mask_row_stride, mask_col_stride;
  int64_t L, S, E, Ev;
  math_t scale;
  bool causal;
  double dropout_p;
  uint64_t seed, first_block;

  // scale * q_i . k_j (the caller's dot product) masked and offset as the contract says.
  __device__ math_t masked(int64_t n, int64_t i, int64_t j, math_t product) const {
    if (causal && j > i) return -INFINITY;
    if (mask != nullptr) {
      const int64_t at = mask_batch.offset(n) + i * mask_row_stride + j * mask_col_stride;
      if (bool_mask) return static_cast<const bool*>(mask)[at] ? product : math_t(-INFINITY);
      return product + static_cast<math_t>(static_cast<const scalar_t*>(mask)[at]);
    }
    return product;
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

template <typename scalar_t>
Problem<scalar_t> problem_of(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionArgs& args) {
  Problem<scalar_t> p{matrices_of<scalar_t>(q),
                      matrices_of<scalar_t>(k),
                      matrices_of<scalar_t>(v),
                      nullptr,
                      false,
                      {},
                      0,
                      0,
                      q.size(-2),
                      k.size(-2),
                      q.size(-1),
                      v.size(-1),
                      static_cast<opmath_t<scalar_t>>(args.scale),
                      args.causal,
                      args.dropout_p,
                      args.seed,
                      args.first_block};
  if (args.mask.defined()) {
    p.mask = args.mask.raw_data();
    p.bool_mask = args.mask.dtype() == DType::boolean;
    p.mask_batch = math::attention_batch(args.mask);
    p.mask_row_stride = args.mask.stride(-2);
    p.mask_col_stride = args.mask.stride(-1);
  }
  return p;
}

// Rows [first, first + count) of matrix n, `width` wide, into shared memory as math_t, by the whole block.
template <typename math_t, typename scalar_t>
__device__ void load_tile(const Matrices<scalar_t>& x, int64_t n, int64_t first, int64_t count, int64_t width,
                          math_t* tile) {
  for (int64_t e = threadIdx.x; e < count * width; e += blockDim.x)
    tile[e] = static_cast<math_t>(x.row(n, first + e / width)[e % width]);
}

template <typename math_t>
__device__ math_t dot(const math_t* a, const math_t* b, int64_t length) {
  math_t total = 0;
  for (int64_t e = 0; e < length; ++e) total += a[e] * b[e];
  return total;
}

template <typename math_t, typename scalar_t>
__device__ math_t dot(const scalar_t* a, const math_t* b, int64_t length) {
  math_t total = 0;
  for (int64_t e = 0; e < length; ++e) total += static_cast<math_t>(a[e]) * b[e];
  return total;
}

// Grid: (matrices, query blocks). Shared: K tile [kTile, E], V tile [kTile, Ev], acc [kThreads, Ev].
template <typename scalar_t>
__global__ void forward_kernel(Problem<scalar_t> p, scalar_t* out, opmath_t<scalar_t>* log_sum_exp) {
  using math_t = opmath_t<scalar_t>;
  extern __shared__ unsigned char shared_bytes[];
  math_t* k_tile = reinterpret_cast<math_t*>(shared_bytes);
  math_t* v_tile = k_tile + kTile * p.E;
  math_t* acc = v_tile + kTile * p.Ev + threadIdx.x * p.Ev;
  const int64_t n = blockIdx.x, first_row = int64_t(blockIdx.y) * kThreads, i = first_row + threadIdx.x;
  const bool active = i < p.L;
  const scalar_t* q_row = active ? p.q.row(n, i) : nullptr;
  for (int64_t c = 0; c < p.Ev; ++c) acc[c] = 0;
  math_t max = -INFINITY, sum = 0;
  const int64_t last_row = min(p.L, first_row + kThreads) - 1;
  const int64_t key_end = p.causal ? min(p.S, last_row + 1) : p.S;
  for (int64_t c0 = 0; c0 < key_end; c0 += kTile) {
    const int64_t cols = min(int64_t(kTile), key_end - c0);
    __syncthreads();  // the previous tile is no longer read
    load_tile(p.k, n, c0, cols, p.E, k_tile);
    load_tile(p.v, n, c0, cols, p.Ev, v_tile);
    __syncthreads();
    if (!active) continue;
    for (int64_t j = 0; j < cols; ++j) {  // online softmax, one key at a time
      const math_t score = p.masked(n, i, c0 + j, p.scale * dot(q_row, k_tile + j * p.E, p.E));
      const math_t new_max = fmax(max, score);
      if (new_max == -INFINITY) continue;  // every key so far masked
      const math_t rescale = exp(max - new_max), weight = exp(score - new_max);
      sum = sum * rescale + weight;
      max = new_max;
      const math_t kept = weight * p.dropout_factor(n, i, c0 + j);
      for (int64_t c = 0; c < p.Ev; ++c) acc[c] = acc[c] * rescale + kept * v_tile[j * p.Ev + c];
    }
  }
  if (!active) return;
  const bool empty = sum == math_t(0);  // a fully masked row: output 0, as PyTorch
  scalar_t* out_row = out + (n * p.L + i) * p.Ev;
  for (int64_t c = 0; c < p.Ev; ++c) out_row[c] = static_cast<scalar_t>(empty ? math_t(0) : acc[c] / sum);
  log_sum_exp[n * p.L + i] = empty ? math_t(-INFINITY) : max + log(sum);
}

// The recomputed probability of (n, i, j) from its score.
template <typename math_t>
__device__ math_t probability(math_t score, math_t log_sum_exp) {
  return log_sum_exp == -INFINITY ? math_t(0) : exp(score - log_sum_exp);
}

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

// dq_i = scale sum_j P_ij (factor_ij dO_i . v_j - delta_i) k_j. Grid: (matrices, query blocks).
// Shared: K tile [kTile, E], V tile [kTile, Ev], dq [kThreads, E].
template <typename scalar_t>
__global__ void grad_q_kernel(Problem<scalar_t> p, const scalar_t* grad_out, const opmath_t<scalar_t>* log_sum_exp,
                              const opmath_t<scalar_t>* delta, scalar_t* grad_q) {
  using math_t = opmath_t<scalar_t>;
  extern __shared__ unsigned char shared_bytes[];
  math_t* k_tile = reinterpret_cast<math_t*>(shared_bytes);
  math_t* v_tile = k_tile + kTile * p.E;
  math_t* dq = v_tile + kTile * p.Ev + threadIdx.x * p.E;
  const int64_t n = blockIdx.x, first_row = int64_t(blockIdx.y) * kThreads, i = first_row + threadIdx.x;
  const bool active = i < p.L;
  for (int64_t e = 0; e < p.E; ++e) dq[e] = 0;
  const int64_t key_end = p.causal ? min(p.S, min(p.L, first_row + kThreads)) : p.S;
  for (int64_t c0 = 0; c0 < key_end; c0 += kTile) {
    const int64_t cols = min(int64_t(kTile), key_end - c0);
    __syncthreads();
    load_tile(p.k, n, c0, cols, p.E, k_tile);
    load_tile(p.v, n, c0, cols, p.Ev, v_tile);
    __syncthreads();
    if (!active) continue;
    const scalar_t* q_row = p.q.row(n, i);
    const scalar_t* g_row = grad_out + (n * p.L + i) * p.Ev;
    for (int64_t j = 0; j < cols; ++j) {
      const math_t score = p.masked(n, i, c0 + j, p.scale * dot(q_row, k_tile + j * p.E, p.E));
      const math_t prob = probability(score, log_sum_exp[n * p.L + i]);
      const math_t grad_score =
          prob * (p.dropout_factor(n, i, c0 + j) * dot(g_row, v_tile + j * p.Ev, p.Ev) - delta[n * p.L + i]);
      for (int64_t e = 0; e < p.E; ++e) dq[e] += p.scale * grad_score * k_tile[j * p.E + e];
    }
  }
  if (!active) return;
  for (int64_t e = 0; e < p.E; ++e) grad_q[(n * p.L + i) * p.E + e] = static_cast<scalar_t>(dq[e]);
}

// dv_j = sum_i Z_ij dO_i and dk_j = scale sum_i dS_ij q_i. Grid: (matrices, key blocks).
// Shared: Q tile [kTile, E], dO tile [kTile, Ev], dk [kThreads, E], dv [kThreads, Ev].
template <typename scalar_t>
__global__ void grad_kv_kernel(Problem<scalar_t> p, Matrices<scalar_t> grad_out, const opmath_t<scalar_t>* log_sum_exp,
                               const opmath_t<scalar_t>* delta, scalar_t* grad_k, scalar_t* grad_v) {
  using math_t = opmath_t<scalar_t>;
  extern __shared__ unsigned char shared_bytes[];
  math_t* q_tile = reinterpret_cast<math_t*>(shared_bytes);
  math_t* g_tile = q_tile + kTile * p.E;
  math_t* dk = g_tile + kTile * p.Ev + threadIdx.x * (p.E + p.Ev);
  math_t* dv = dk + p.E;
  const int64_t n = blockIdx.x, first_col = int64_t(blockIdx.y) * kThreads, j = first_col + threadIdx.x;
  const bool active = j < p.S;
  for (int64_t e = 0; e < p.E; ++e) dk[e] = 0;
  for (int64_t c = 0; c < p.Ev; ++c) dv[c] = 0;
  // With causal, query rows before this block's first key see none of its keys.
  for (int64_t r0 = p.causal ? first_col / kTile * kTile : 0; r0 < p.L; r0 += kTile) {
    const int64_t rows = min(int64_t(kTile), p.L - r0);
    __syncthreads();
    load_tile(p.q, n, r0, rows, p.E, q_tile);
    load_tile(grad_out, n, r0, rows, p.Ev, g_tile);
    __syncthreads();
    if (!active) continue;
    const scalar_t* k_row = p.k.row(n, j);
    const scalar_t* v_row = p.v.row(n, j);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r0 + r;
      const math_t score = p.masked(n, i, j, p.scale * dot(k_row, q_tile + r * p.E, p.E));
      const math_t prob = probability(score, log_sum_exp[n * p.L + i]);
      const math_t factor = p.dropout_factor(n, i, j);
      const math_t grad_score = prob * (factor * dot(v_row, g_tile + r * p.Ev, p.Ev) - delta[n * p.L + i]);
      for (int64_t c = 0; c < p.Ev; ++c) dv[c] += prob * factor * g_tile[r * p.Ev + c];
      for (int64_t e = 0; e < p.E; ++e) dk[e] += p.scale * grad_score * q_tile[r * p.E + e];
    }
  }
  if (!active) return;
  for (int64_t e = 0; e < p.E; ++e) grad_k[(n * p.S + j) * p.E + e] = static_cast<scalar_t>(dk[e]);
  for (int64_t c = 0; c < p.Ev; ++c) grad_v[(n * p.S + j) * p.Ev + c] = static_cast<scalar_t>(dv[c]);
}

int64_t matrix_count(const Tensor& t) {
  int64_t count = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) count *= t.size(d);
  return count;
}

// Launches `kernel` on a (matrices, ceil(items / kThreads)) grid — matrices on x, whose limit is
// 2^31 - 1 rather than 65535 — with `shared` bytes of dynamic shared memory, allowing more than
// the default 48 KiB where the head dims need it.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, int64_t items, int64_t matrices, size_t shared, Args... args) {
  if (items == 0 || matrices == 0) return;
  SG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  const dim3 grid(static_cast<unsigned>(matrices), static_cast<unsigned>((items + kThreads - 1) / kThreads));
  kernel<<<grid, kThreads, shared, compute_stream()>>>(args...);
  SG_CUDA_CHECK_LAUNCH();
}

// The kernels' launches for one dtype (outside SG_DISPATCH_FLOATING: the macro would split the
// commas of a <<<...>>> launch).
template <typename scalar_t>
void forward_typed(const Tensor& out, const Tensor& log_sum_exp, const Problem<scalar_t>& p, int64_t matrices) {
  using math_t = opmath_t<scalar_t>;
  const size_t shared = sizeof(math_t) * (kTile * (p.E + p.Ev) + kThreads * p.Ev);
  launch(forward_kernel<scalar_t>, p.L, matrices, shared, p, static_cast<scalar_t*>(out.raw_data()),
         static_cast<math_t*>(log_sum_exp.raw_data()));
}

template <typename scalar_t>
void backward_typed(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                    const Tensor& out, const Tensor& log_sum_exp, const Problem<scalar_t>& p, int64_t matrices) {
  using math_t = opmath_t<scalar_t>;
  const Tensor delta = empty(log_sum_exp.sizes(), {log_sum_exp.dtype(), log_sum_exp.device()});
  const auto* g = static_cast<const scalar_t*>(grad_out.raw_data());
  const auto* lse = static_cast<const math_t*>(log_sum_exp.raw_data());
  auto* delta_data = static_cast<math_t*>(delta.raw_data());
  const int64_t rows = matrices * p.L;
  if (rows > 0) {
    delta_kernel<scalar_t><<<static_cast<unsigned>((rows + 255) / 256), 256, 0, compute_stream()>>>(
        g, static_cast<const scalar_t*>(out.raw_data()), rows, p.Ev, delta_data);
    SG_CUDA_CHECK_LAUNCH();
  }
  launch(grad_q_kernel<scalar_t>, p.L, matrices, sizeof(math_t) * (kTile * (p.E + p.Ev) + kThreads * p.E), p, g, lse,
         static_cast<const math_t*>(delta_data), static_cast<scalar_t*>(grad_q.raw_data()));
  launch(grad_kv_kernel<scalar_t>, p.S, matrices, sizeof(math_t) * (kTile + kThreads) * (p.E + p.Ev), p,
         matrices_of<scalar_t>(grad_out), lse, static_cast<const math_t*>(delta_data),
         static_cast<scalar_t*>(grad_k.raw_data()), static_cast<scalar_t*>(grad_v.raw_data()));
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionArgs& args) {
  const DeviceGuard guard(q.device().index);
  SG_DISPATCH_FLOATING(q.dtype(), "scaled_dot_product_attention", [&]<typename scalar_t>() {
    forward_typed<scalar_t>(out, log_sum_exp, problem_of<scalar_t>(q, k, v, args), matrix_count(q));
  });
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const AttentionArgs& args) {
  const DeviceGuard guard(q.device().index);
  SG_DISPATCH_FLOATING(q.dtype(), "scaled_dot_product_attention", [&]<typename scalar_t>() {
    backward_typed<scalar_t>(grad_q, grad_k, grad_v, grad_out, out, log_sum_exp, problem_of<scalar_t>(q, k, v, args),
                             matrix_count(q));
  });
}

}  // namespace sg::cuda
