#pragma once
// defines: cuda::kBlockThreads, cuda::grid_for, cuda::grid_first, cuda::grid_step — the launch
//          shape of a grid-stride loop over n items, for the kernels that do not go through
//          core/cuda/elementwise.cuh (random fills, indexing, pooling).
#include <algorithm>
#include <cstdint>

namespace sg::cuda {

inline constexpr int kBlockThreads = 256;

// Enough blocks to cover n items, capped: past the cap, each thread loops over more items.
inline unsigned grid_for(int64_t n) {
  constexpr int64_t kMaxBlocks = 65536;
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlockThreads - 1) / kBlockThreads, 1, kMaxBlocks));
}

// This thread's first item in a grid-stride loop, and the distance to its next one.
__device__ inline int64_t grid_first() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_step() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace sg::cuda
