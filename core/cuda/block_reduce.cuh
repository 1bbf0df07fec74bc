#pragma once
// defines: cuda::warp_reduce, cuda::block_reduce (a fixed-order tree over the threads of a warp
//          or block), cuda::RowThreads and cuda::launch_rows — the "one block or one thread per
//          row" launcher that the reduction, softmax, layer-norm and cross-entropy kernels share.
//
// Note [Deterministic GPU row reductions]
// A row is reduced either by one thread alone (short rows: many rows run side by side) or by one
// block (long rows): thread t of the block folds elements t, t + blockDim, ... in order, and the
// block's partial results are combined by a shuffle tree whose shape depends only on blockDim.
// launch_rows picks the mode and blockDim from the shape alone, and no float is ever added
// atomically, so a result has the same bits on every run (not the CPU's bits: the order differs).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"

namespace sg::cuda {

inline constexpr int kWarpSize = 32;

// __shfl_down_sync for any trivially copyable value: the built-in overloads for plain numbers,
// 32-bit words one by one for structs (such as a value and its index).
template <typename T>
__device__ inline T shuffle_down(T value, unsigned delta) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>) {
    return __shfl_down_sync(0xffffffffu, value, delta);
  } else {
    static_assert(sizeof(T) % sizeof(int) == 0, "shuffle_down: pad the struct to whole 32-bit words");
    int words[sizeof(T) / sizeof(int)];
    memcpy(words, &value, sizeof(T));
    for (int& word : words) word = __shfl_down_sync(0xffffffffu, word, delta);
    memcpy(&value, words, sizeof(T));
    return value;
  }
}

// Combines the values of lanes [0, count) of the calling warp; lane 0 gets the result. Every lane
// of the warp must call it (the shuffles name the full mask). No identity element is needed:
// lanes past `count` are never combined in.
template <typename T, typename Combine>
__device__ inline T warp_reduce(T value, Combine combine, int count = kWarpSize) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const T other = shuffle_down(value, offset);
    if (lane + offset < count) value = combine(value, other);
  }
  return value;
}

// Combines one value from every thread of the block and returns the result to all of them.
// blockDim.x must be a multiple of 32, and every thread must call it (it holds barriers). It may
// be called several times in a row: the first barrier keeps a call from overwriting the slots
// before every thread has read the previous call's result. T must be trivially constructible
// (it lives in shared memory).
template <typename T, typename Combine>
__device__ inline T block_reduce(T value, Combine combine) {
  __shared__ T slots[kWarpSize + 1];  // one partial result per warp, then the block's result
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  __syncthreads();
  value = warp_reduce(value, combine);
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = warp_reduce(slots[lane < warps ? lane : 0], combine, warps);
    if (lane == 0) slots[kWarpSize] = value;
  }
  __syncthreads();
  return slots[kWarpSize];
}

// How the threads of a row kernel share the row's elements: one thread takes them all, or the
// threads of a block take every blockDim-th one. reduce() combines the threads' partial results
// (a no-op for one thread) and hands the result to all of them. Every thread of a block-per-row
// launch must call reduce().
template <bool kBlockPerRow>
struct RowThreads {
  __device__ int64_t first() const { return kBlockPerRow ? static_cast<int64_t>(threadIdx.x) : 0; }
  __device__ int64_t step() const { return kBlockPerRow ? static_cast<int64_t>(blockDim.x) : 1; }
  __device__ bool leader() const { return first() == 0; }  // the thread that writes the row's result
  template <typename T, typename Combine>
  __device__ T reduce(T value, Combine combine) const {
    if constexpr (kBlockPerRow) return block_reduce(value, combine);
    else return value;
  }
  // Folds f(i) for i in [0, length) with `combine`, starting from `init` (which must not change a
  // value it is combined with: 0 for a sum, -inf for a max), and returns the row's result.
  template <typename T, typename F, typename Combine>
  __device__ T fold(int64_t length, T init, F f, Combine combine) const {
    T value = init;
    for (int64_t i = first(); i < length; i += step()) value = combine(value, f(i));
    return reduce(value, combine);
  }
};

struct Plus {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
// The larger of two values; a NaN may be dropped (callers whose result must carry a NaN get it
// from the sum that follows, or combine with their own rule).
struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Runs op.template row<kBlockPerRow>(row, threads) for every row in [0, rows).
template <bool kBlockPerRow, typename RowOp>
__global__ void rows_kernel(int64_t rows, RowOp op) {
  const int64_t row =
      kBlockPerRow ? static_cast<int64_t>(blockIdx.x) : static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Block per row: the grid has exactly `rows` blocks, so no thread leaves before a barrier.
  if (row < rows) op.template row<kBlockPerRow>(row, RowThreads<kBlockPerRow>{});
}

// Launches `op` over `rows` rows of `row_length` elements (Note [Deterministic GPU row
// reductions]): one block per row when `block_per_row` (the caller's call: rows long enough,
// and laid out so a block's threads read neighbouring elements), with 32 to 512 threads as the
// row length asks; else one thread per row, 256 rows per block.
template <typename RowOp>
void launch_rows(int64_t rows, int64_t row_length, bool block_per_row, const RowOp& op) {
  if (rows == 0) return;
  constexpr int64_t kMaxGrid = 0x7fffffff;  // gridDim.x limit
  if (block_per_row && rows <= kMaxGrid) {
    const int64_t threads = std::clamp<int64_t>((row_length + kWarpSize - 1) / kWarpSize * kWarpSize, kWarpSize, 512);
    rows_kernel<true><<<static_cast<unsigned>(rows), static_cast<unsigned>(threads), 0, compute_stream()>>>(rows, op);
  } else {
    constexpr int64_t kThreads = 256;
    rows_kernel<false>
        <<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, compute_stream()>>>(rows, op);
  }
  SG_CUDA_CHECK_LAUNCH();
}

}  // namespace sg::cuda
