#pragma once
// defines: sg::cuda — what the rest of syncgrad and its users may ask of the CUDA backend
//          without including a CUDA header: is it there, how many GPUs, which one is current,
//          wait for the GPU, device memory statistics.
//
// A CPU-only build (SG_CUDA=OFF, or no nvcc) answers is_available() == false and every other
// call throws sg::Error saying why (core/cuda_runtime/no_cuda.cpp); a CUDA build on a machine without a
// GPU answers the same way, with the driver's reason.
#include <cstddef>
#include <string>

namespace sg::cuda {

bool is_available();               // built with CUDA and at least one GPU usable
int device_count();                // 0 when not available
std::string unavailable_reason();  // why is_available() is false ("" when it is true)

int current_device();
void set_device(int index);  // for this thread, as cudaSetDevice
void synchronize();          // waits until every kernel queued on the current device ran

// The caching allocator's bookkeeping for one device (core/cuda/caching_allocator.h).
struct MemoryStats {
  size_t allocated_bytes = 0;       // held by live tensors (rounded block sizes)
  size_t reserved_bytes = 0;        // allocated + cached, i.e. what cudaMalloc handed out
  size_t peak_allocated_bytes = 0;  // the largest allocated_bytes seen (reset_peak_memory_stats)
  size_t allocations = 0;           // allocate() calls
  size_t cache_hits = 0;            // of those, served from a cached block
  size_t device_allocations = 0;    // cudaMalloc calls
};
MemoryStats memory_stats(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Returns every cached (free) block to the driver, as torch.cuda.empty_cache().
void empty_cache();

// TF32: whether f32 matrix products (cuBLAS) and convolutions (cuDNN) may round their inputs
// to TensorFloat-32 (10-bit mantissa) on GPUs that have it — several times faster, with about
// 1e-3 relative error. Off by default, as torch.backends.cuda.matmul.allow_tf32 (PyTorch's
// cuDNN switch defaults to on; here one switch governs both). A CPU-only build keeps the flag
// but has nothing it affects.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace sg::cuda
