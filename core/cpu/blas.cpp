// Note [Choosing the BLAS kernels by CPU features] in core/cpu/blas.h.
#include "core/cpu/blas.h"

#include <cblas.h>  // declares: cblas_sgemm, cblas_dgemm, openblas_get_corename (called through dlsym)
#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.h>  // declares: dnnl_sgemm, dnnl_version

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

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

F32GemmLibrary f32_gemm_library_for(const CpuFeatures& features) {
  if (const char* choice = std::getenv("SG_BLAS")) {
    if (std::string(choice) == "openblas") return F32GemmLibrary::openblas;
    if (std::string(choice) == "onednn") return F32GemmLibrary::onednn;
  }
  return features.avx512f && features.avx512bw && features.avx512vl && features.avx512dq ? F32GemmLibrary::onednn
                                                                                         : F32GemmLibrary::openblas;
}

namespace {

struct LoadedBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  bool f32_on_onednn = false;
  std::string description;
};

// OpenBLAS reads OPENBLAS_CORETYPE whatever its case.
bool same_core(const std::string& a, const std::string& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

// "oneDNN 3.0.0 sgemm (...)": the f32 half of the description, when oneDNN runs it.
std::string onednn_description() {
  const dnnl_version_t* version = dnnl_version();
  const char* why =
      std::getenv("SG_BLAS") ? "SG_BLAS=onednn set by the user" : "chosen by syncgrad for this CPU's AVX-512";
  return "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
         std::to_string(version->patch) + " sgemm (" + why + ")";
}

LoadedBlas load_blas() {
  LoadedBlas blas;
  if (const char* choice = std::getenv("SG_BLAS"); choice && std::string(choice) == "eigen") {
    blas.description = "eigen (SG_BLAS=eigen)";
    return blas;
  }
  std::string how = "OpenBLAS's own choice";
  if (const char* user_core = std::getenv("OPENBLAS_CORETYPE")) {
    how = std::string("OPENBLAS_CORETYPE=") + user_core + " set by the user";
    // A setting copied from another machine silently halves the speed of every OpenBLAS product
    // on a wider CPU (Haswell's kernels on an AVX-512 one): say so where the choice is printed.
    if (const std::string best = openblas_core_for(cpu_features()); !best.empty() && !same_core(best, user_core))
      how += "; this CPU could run the faster " + best + " core";
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
  blas.f32_on_onednn = f32_gemm_library_for(cpu_features()) == F32GemmLibrary::onednn;
  blas.description = blas.f32_on_onednn ? "f32: " + onednn_description() + "; f64: " + blas.description
                                        : "f32 and f64: " + blas.description;
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
bool f32_gemm_on_onednn() { return loaded_blas().f32_on_onednn; }
std::string blas_description() { return loaded_blas().description; }

void blas_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc) {
  if (loaded_blas().f32_on_onednn) {
    // Row-major, as ours; oneDNN runs on the same OpenMP pool (one thread inside a parallel region).
    const dnnl_status_t status =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    SG_CHECK(status == dnnl_success, "gemm: oneDNN's sgemm failed (status ", static_cast<int>(status), ") for m ", m,
             ", n ", n, ", k ", k, ", lda ", lda, ", ldb ", ldb, ", ldc ", ldc);
    return;
  }
  openblas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void openblas_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) {
  loaded_blas().sgemm(CblasRowMajor, transpose_flag(trans_a), transpose_flag(trans_b), m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc);
}

void blas_dgemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
                const double* b, int ldb, double beta, double* c, int ldc) {
  loaded_blas().dgemm(CblasRowMajor, transpose_flag(trans_a), transpose_flag(trans_b), m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc);
}

}  // namespace sg::cpu
