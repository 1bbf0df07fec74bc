#pragma once
// defines: cuda::cublas_handle, SG_CUBLAS_CHECK — the cuBLAS context of each GPU and the check
//          every cuBLAS call goes through. Included by core/cuda/ sources only (it brings in
//          cublas_v2.h); the TF32 switch users set lives in core/cuda/runtime.h.
#include <cublas_v2.h>

namespace sg::cuda {

// The handle of GPU `device`: created on first use, bound to compute_stream() (Note [One compute
// stream]), never destroyed. cuBLAS allows one handle to serve several host threads.
cublasHandle_t cublas_handle(int device);

namespace detail {
// Throws sg::Error "cuBLAS error <name> (<text>) in <call> at <file>:<line>".
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace sg::cuda

#define SG_CUBLAS_CHECK(call)                                                              \
  do {                                                                                     \
    const cublasStatus_t sg_cublas_status = (call);                                        \
    if (sg_cublas_status != CUBLAS_STATUS_SUCCESS)                                         \
      ::sg::cuda::detail::throw_cublas_error(sg_cublas_status, #call, __FILE__, __LINE__); \
  } while (0)
