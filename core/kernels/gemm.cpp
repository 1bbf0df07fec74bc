#include "core/kernels/gemm.h"

#include "core/cpu/gemm_kernels.h"
#include "core/cpu/gemm_onednn.h"
#include "core/cuda/gemm_kernels.h"
#include "core/kernels/pointwise.h"
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

void gemm_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  SG_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2 && bias.dim() == 1 && a.size(1) == b.size(0) &&
               out.size(0) == a.size(0) && out.size(1) == b.size(1) && bias.size(0) == out.size(1) &&
               bias.dtype() == out.dtype() && bias.device() == out.device(),
           "gemm_bias: expected 2-D out = a @ b and a 1-D bias of out's columns, dtype and device: out ",
           shape_str(out.sizes()), " = a ", shape_str(a.sizes()), " @ b ", shape_str(b.sizes()), " + bias ",
           shape_str(bias.sizes()), " (", bias.dtype(), " on ", bias.device(), ")");
  if (out.device().is_cpu() && out.numel() > 0 && a.dtype() == out.dtype() && b.dtype() == out.dtype()) {
    const profiler::RecordScope scope("gemm", profiler::Category::gemm, a, b);
    if (cpu::onednn::try_gemm_bias(out, a, b, bias)) return;
  }
  copy(out, bias.expand(out.sizes()));
  gemm(out, a, b, 1.0, 1.0);
}

}  // namespace sg::kernels
