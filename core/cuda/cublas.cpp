// One cuBLAS handle per GPU, and the TF32 switch of a CUDA build.
#include "core/cuda/cublas.h"

#include <atomic>

#include "core/cuda/per_device.h"
#include "core/error.h"

namespace sg::cuda {

namespace detail {
void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(::sg::detail::concat("cuBLAS error ", cublasGetStatusName(status), " (", cublasGetStatusString(status),
                                   ") in ", call, " at ", file, ":", line));
}
}  // namespace detail

namespace {
std::atomic<bool> tf32_allowed{false};
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

cublasHandle_t cublas_handle(int device) {
  static auto* handles = new PerDevice<cublasHandle_t>("cuBLAS");  // Note in core/cuda/per_device.h
  return handles->get(device, [] {
    auto* handle = new cublasHandle_t(nullptr);
    SG_CUBLAS_CHECK(cublasCreate(handle));
    SG_CUBLAS_CHECK(cublasSetStream(*handle, compute_stream()));
    // f16/bf16 products accumulate in f32 all the way (core/kernels/gemm.h): no split-K partial
    // sums rounded to 16 bits.
    SG_CUBLAS_CHECK(cublasSetMathMode(*handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    return handle;
  });
}

}  // namespace sg::cuda
