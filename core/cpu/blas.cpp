// Note [Choosing the BLAS kernels by CPU features] in core/cpu/blas.h.
#include "core/cpu/blas.h"

#include <cblas.h>  // declares: cblas_sgemm, cblas_dgemm, openblas_get_corename (called through dlsym)
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace sg::cpu {

CpuFeatures cpu_features() {
  // GCC's builtins read cpuid and check with xgetbv that the OS saves the AVX-512 registers.
  __builtin_cpu_init();
  CpuFeatures features;
  features.avx512f = __builtin_cpu_supports("avx512f");
  features.avx512bw = __builtin_cpu_supports("avx512bw");
  features.avx512vl = __builtin_cpu_supports("avx512vl");
  features.avx512dq = __builtin_cpu_supports("avx512dq");
  return features;
}

std::string openblas_core_for(const CpuFeatures& features) {
  // OpenBLAS's SkylakeX kernels use exactly these four AVX-512 subsets (its own cpuid check
  // for the core asks for F, BW, VL and DQ too).
  if (features.avx512f && features.avx512bw && features.avx512vl && features.avx512dq) return "SkylakeX";
  return "";
}

namespace {

struct LoadedBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  std::string description;
};

LoadedBlas load_blas() {
  LoadedBlas blas;
  if (const char* choice = std::getenv("SG_BLAS"); choice && std::string(choice) == "eigen") {
    blas.description = "eigen (SG_BLAS=eigen)";
    return blas;
  }
  std::string how = "OpenBLAS's own choice";
  if (const char* user_core = std::getenv("OPENBLAS_CORETYPE")) {
    how = std::string("OPENBLAS_CORETYPE=") + user_core + " set by the user";
  } else if (const std::string core = openblas_core_for(cpu_features()); !core.empty()) {
    // Set for the load below, then removed again: the variable is ours to pass, not to leak
    // into the programs this process may start.
    ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    how = "chosen by syncgrad for this CPU's AVX-512";
  }
  // The OpenMP build syncgrad was configured with (it shares our thread pool), else whichever
  // build the system's alternatives name.
  void* library = ::dlopen(SG_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (how.starts_with("chosen")) ::unsetenv("OPENBLAS_CORETYPE");
  if (library == nullptr) {
    blas.description = std::string("eigen (OpenBLAS could not be loaded: ") + ::dlerror() + ")";
    return blas;
  }
  blas.sgemm = reinterpret_cast<decltype(&cblas_sgemm)>(::dlsym(library, "cblas_sgemm"));
  blas.dgemm = reinterpret_cast<decltype(&cblas_dgemm)>(::dlsym(library, "cblas_dgemm"));
  const auto corename = reinterpret_cast<decltype(&openblas_get_corename)>(::dlsym(library, "openblas_get_corename"));
  const auto config = reinterpret_cast<decltype(&openblas_get_config)>(::dlsym(library, "openblas_get_config"));
  if (blas.sgemm == nullptr || blas.dgemm == nullptr) {
    blas = {};
    blas.description = "eigen (libopenblas.so.0 has no cblas_sgemm / cblas_dgemm)";
    return blas;
  }
  blas.description =
      std::string(config ? config() : "OpenBLAS") + ", core " + (corename ? corename() : "?") + " (" + how + ")";
  return blas;
}

// Loaded once, on first use; the library stays loaded for the life of the process.
const LoadedBlas& loaded_blas() {
  static const LoadedBlas blas = load_blas();
  return blas;
}

CBLAS_TRANSPOSE transpose_flag(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }

}  // namespace

bool blas_available() { return loaded_blas().sgemm != nullptr; }
std::string blas_description() { return loaded_blas().description; }

void blas_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc) {
  loaded_blas().sgemm(CblasRowMajor, transpose_flag(trans_a), transpose_flag(trans_b), m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc);
}

void blas_dgemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
                const double* b, int ldb, double beta, double* c, int ldc) {
  loaded_blas().dgemm(CblasRowMajor, transpose_flag(trans_a), transpose_flag(trans_b), m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc);
}

}  // namespace sg::cpu
