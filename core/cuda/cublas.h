#pragma once
// defines: cuda::cublas, cuda::cublas_handle, SG_CUBLAS_CHECK — the cuBLAS functions (opened on
//          first use), the cuBLAS context of each GPU and the check every cuBLAS call goes through. Included by
//          core/cuda/ sources only (it brings in cublas_v2.h); the TF32 switch users set lives in
//          core/cuda_runtime/runtime.h.
#include <cublas_v2.h>

namespace sg::cuda {

// The cuBLAS entry points syncgrad calls. The library is opened with dlopen on the first GPU
// matmul instead of being linked (Note [cuBLAS is opened on first use] in core/cuda/cublas.cpp);
// every cuBLAS call goes through this table.
struct CublasLibrary {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                                            const void* alpha, const void* a, cudaDataType a_type, int lda,
                                            long long stride_a, const void* b, cudaDataType b_type, int ldb,
                                            long long stride_b, const void* beta, void* c, cudaDataType c_type, int ldc,
                                            long long stride_c, int batch_count, cublasComputeType_t compute,
                                            cublasGemmAlgo_t algo);
  const char* (*status_name)(cublasStatus_t);
  const char* (*status_string)(cublasStatus_t);
};
// Opens libcublas on the first call; throws sg::Error naming the library and dlerror() when it
// cannot be opened or lacks an entry point.
const CublasLibrary& cublas();

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
