#pragma once
// defines: SG_CUDA_CHECK — every CUDA runtime call's return code checked, with the call, the
//          file and the line in the sg::Error. (cuBLAS, cuDNN and NCCL have their own checks
//          beside the code that calls them: core/cuda/cublas.h, cudnn.h, dist/cuda/nccl_check.h.)
#include <cuda_runtime_api.h>

namespace sg::cuda::detail {
// Throws sg::Error "CUDA error <name> (<text>) in <call> at <file>:<line>". Clears the
// runtime's sticky last-error first, so one failure is reported once.
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
}  // namespace sg::cuda::detail

#define SG_CUDA_CHECK(call)                                                            \
  do {                                                                                 \
    const cudaError_t sg_cuda_status = (call);                                         \
    if (sg_cuda_status != cudaSuccess)                                                 \
      ::sg::cuda::detail::throw_cuda_error(sg_cuda_status, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch errors (bad configuration, no kernel image for this GPU)
// arrive through cudaGetLastError, not through the launch itself.
#define SG_CUDA_CHECK_LAUNCH() SG_CUDA_CHECK(cudaGetLastError())
