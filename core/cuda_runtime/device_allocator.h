#pragma once
// defines: cuda::device_allocator, cuda::pinned_host_allocator, cuda::device_block_cache — the
//          Allocators behind CUDA tensors and behind page-locked host staging memory.
//          No CUDA header: core/allocator.cpp includes it.
#include "core/allocator.h"
#include "core/cuda_runtime/block_cache.h"

namespace sg::cuda {

// The caching allocator of GPU `index` (Note [Why GPU memory is cached]).
Allocator& device_allocator(int index);
BlockCache& device_block_cache(int index);

// Page-locked host memory (cudaHostAlloc): host<->device copies from it run at full bus speed
// and can be asynchronous. Tensors allocated from it are CPU tensors (the DataLoader's
// pin_memory option). Cached like device memory.
Allocator& pinned_host_allocator();

}  // namespace sg::cuda
