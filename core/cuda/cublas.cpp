// cuBLAS opened on first use, one cuBLAS handle per GPU, and the TF32 switch of a CUDA build.
#include "core/cuda/cublas.h"

#include <dlfcn.h>

#include <atomic>

#include "core/cuda_runtime/per_device.h"
#include "core/error.h"

namespace sg::cuda {

// Note [cuBLAS is opened on first use]
// Linking libcublas makes the dynamic loader map and relocate it, and the 540 MB libcublasLt it
// depends on, in every process at start: measured ~150 MB of resident memory before main(), in
// CPU-only programs too (a 224x224 ResNet34 step peaked at 584 MB, 430 MB of it ours). Only the
// GPU matmul needs cuBLAS, so it is opened there with dlopen and its few entry points looked up
// by name. The soname comes first (LD_LIBRARY_PATH and the loader cache apply), then the toolkit
// directory the build found it in.
namespace {

void* open_cublas() {
  for (const char* name : {SG_CUBLAS_SONAME, SG_CUBLAS_DIR "/" SG_CUBLAS_SONAME}) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return library;
  }
  const char* reason = dlerror();
  SG_FAIL("cuBLAS: cannot open ", SG_CUBLAS_SONAME, " (nor in ", SG_CUBLAS_DIR,
          "), needed for matmul on a GPU: ", reason ? reason : "unknown dlopen error");
}

template <typename Function>
void look_up(void* library, const char* symbol, Function& entry) {
  entry = reinterpret_cast<Function>(dlsym(library, symbol));
  SG_CHECK(entry != nullptr, "cuBLAS: ", SG_CUBLAS_SONAME, " has no entry point ", symbol);
}

CublasLibrary load_cublas() {
  void* library = open_cublas();  // never closed: handles live until exit
  CublasLibrary api{};
  look_up(library, "cublasCreate_v2", api.create);
  look_up(library, "cublasSetStream_v2", api.set_stream);
  look_up(library, "cublasSetMathMode", api.set_math_mode);
  look_up(library, "cublasGemmStridedBatchedEx", api.gemm_strided_batched_ex);
  look_up(library, "cublasGetStatusName", api.status_name);
  look_up(library, "cublasGetStatusString", api.status_string);
  return api;
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary api = load_cublas();  // a throw leaves it unset: the next call retries
  return api;
}

namespace detail {
void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  SG_FAIL("cuBLAS error ", cublas().status_name(status), " (", cublas().status_string(status), ") in ", call, " at ",
          file, ":", line);
}
}  // namespace detail

namespace {
std::atomic<bool> tf32_allowed{false};
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

cublasHandle_t cublas_handle(int device) {
  static auto* handles = new PerDevice<cublasHandle_t>("cuBLAS");  // Note in core/cuda_runtime/per_device.h
  return handles->get(device, [] {
    auto* handle = new cublasHandle_t(nullptr);
    SG_CUBLAS_CHECK(cublas().create(handle));
    SG_CUBLAS_CHECK(cublas().set_stream(*handle, compute_stream()));
    // f16/bf16 products accumulate in f32 all the way (core/kernels/gemm.h): no split-K partial
    // sums rounded to 16 bits.
    SG_CUBLAS_CHECK(cublas().set_math_mode(*handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    return handle;
  });
}

}  // namespace sg::cuda
