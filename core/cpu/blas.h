#pragma once
// defines: cpu::blas_sgemm, cpu::blas_dgemm, cpu::blas_available, cpu::f32_gemm_on_onednn, cpu::blas_description,
//          cpu::openblas_core_for, cpu::f32_gemm_library_for — the libraries behind the f32/f64
//          GEMM, and which of their kernels run on this CPU.
//
// Note [Choosing the BLAS kernels by CPU features]
// OpenBLAS carries kernels for many CPUs and picks one when it is loaded, by the CPU's model
// number. A library older than the CPU does not know the model and falls back to an older
// kernel: Debian's 0.3.21 runs its AVX2 ("Haswell") kernels on AVX-512 machines it does not
// know, at half their speed. It does honour OPENBLAS_CORETYPE, but reads it once, while the
// library is being loaded — before main() in a program linked against it. So syncgrad does not
// link OpenBLAS: it loads it with dlopen on the first GEMM, after choosing the kernel from the
// CPU's features (cpuid, never a list of model names that ages) and setting OPENBLAS_CORETYPE
// for that one load (unless the user set it). Where OpenBLAS's own choice is right — every CPU
// without AVX-512 — nothing is set. SG_BLAS=eigen uses Eigen's GEMM instead (also the fallback
// when OpenBLAS cannot be loaded); docs/performance.md has the measurements behind all this.
//
// Note [The f32 GEMM library]
// On a CPU with AVX-512, f32 GEMM goes to oneDNN's sgemm (oneDNN is already here for the
// convolutions): its JIT kernels measured 7-25% faster than OpenBLAS's SkylakeX kernels on a
// Sapphire Rapids Xeon, at every shape the apps run (square n = 1024, 2048 and all of gpt-mini's
// linear layers, forward and both gradients, 1 and 2 threads), level with torch.mm's MKL. Its
// results are the same bits run to run and on 1 or 2 threads, as OpenBLAS's are. Without AVX-512
// OpenBLAS keeps f32 too (measured level with MKL's AVX2 path on a Zen 3, where oneDNN was not
// timed); f64 is always OpenBLAS's (oneDNN has no dgemm). The rule is fixed by the CPU's features, never by a timing at
// start-up, so a machine gives the same bits every run. SG_BLAS=openblas or SG_BLAS=onednn forces the f32 choice.
#include <string>

namespace sg::cpu {

struct CpuFeatures {
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
};
CpuFeatures cpu_features();  // of this CPU, as the OS lets programs use them

// The OPENBLAS_CORETYPE that runs OpenBLAS's widest kernels on a CPU with `features`; empty when
// OpenBLAS's own choice is already right.
std::string openblas_core_for(const CpuFeatures& features);

// The library for f32 GEMM on a CPU with `features`, unless SG_BLAS says otherwise (Note [The f32
// GEMM library]).
enum class F32GemmLibrary { openblas, onednn };
F32GemmLibrary f32_gemm_library_for(const CpuFeatures& features);

// Whether f32/f64 GEMM runs on OpenBLAS (else: Eigen's product). Loads the library on first call.
bool blas_available();
// Whether f32 GEMM runs on oneDNN (Note [The f32 GEMM library]).
bool f32_gemm_on_onednn();
// "f32: oneDNN 3.0.0 sgemm (chosen by syncgrad for this CPU's AVX-512); f64: OpenBLAS 0.3.21 ...
// core SkylakeX (chosen by syncgrad for this CPU's AVX-512)", or why it is Eigen.
std::string blas_description();

// Row-major C = alpha op(A) op(B) + beta C, as cblas_sgemm / cblas_dgemm: blas_sgemm through the f32
// library chosen, blas_dgemm through OpenBLAS. Only when blas_available().
void blas_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc);
void blas_dgemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
                const double* b, int ldb, double beta, double* c, int ldc);
// OpenBLAS's sgemm whatever the f32 choice, for the benchmarks that time the libraries side by side.
void openblas_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace sg::cpu
