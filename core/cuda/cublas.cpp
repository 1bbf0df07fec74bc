// One cuBLAS handle per GPU, and the TF32 switch of a CUDA build.
#include "core/cuda/cublas.h"

#include <array>
#include <atomic>
#include <mutex>

#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/error.h"

namespace sg::cuda {

namespace detail {
void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(::sg::detail::concat("cuBLAS error ", cublasGetStatusName(status), " (", cublasGetStatusString(status),
                                   ") in ", call, " at ", file, ":", line));
}
}  // namespace detail

namespace {
constexpr int kMaxDevices = 64;
std::atomic<bool> tf32_allowed{false};
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

// Created on first use and never destroyed, like the caching allocators (device_allocator.cpp):
// cublasDestroy during static destruction may run after the CUDA runtime is gone.
cublasHandle_t cublas_handle(int device) {
  static std::array<cublasHandle_t, kMaxDevices> handles{};
  static std::mutex mutex;
  SG_CHECK(device >= 0 && device < device_count() && device < kMaxDevices, "cuBLAS: no device cuda:", device,
           " (this machine has ", device_count(), " GPU(s))");
  std::lock_guard lock(mutex);
  if (handles[device] == nullptr) {
    DeviceGuard guard(device);  // a handle belongs to the device current at its creation
    cublasHandle_t handle = nullptr;
    SG_CUBLAS_CHECK(cublasCreate(&handle));
    SG_CUBLAS_CHECK(cublasSetStream(handle, compute_stream()));
    // f16/bf16 products accumulate in f32 all the way (core/kernels/gemm.h): no split-K partial
    // sums rounded to 16 bits.
    SG_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    handles[device] = handle;
  }
  return handles[device];
}

}  // namespace sg::cuda
