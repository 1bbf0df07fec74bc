#include "core/kernels/gemm.h"

#include "core/cpu/gemm_kernels.h"
#include "core/cuda/gemm_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the GEMM (Note [Kernel dispatch] in core/device.h).
namespace sg::kernels {

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  const profiler::RecordScope scope("gemm", profiler::Category::gemm, a, b);
  if (runs_on_cuda(out.device(), "gemm")) {
    if constexpr (kCudaBuild) return cuda::gemm(out, a, b, alpha, beta);
  }
  cpu::gemm(out, a, b, alpha, beta);
}

}  // namespace sg::kernels
