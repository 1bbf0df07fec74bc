#include "core/kernels/gemm.h"

// The device dispatch point for the GEMM (see core/kernels/pointwise.cpp). A CUDA build adds
// `if (is_cuda) return cuda::gemm(...)` (cuBLAS) here; no op front changes.
namespace sg::kernels {

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  check_device_supported(out.device(), "gemm");
  cpu::gemm(out, a, b, alpha, beta);
}

}  // namespace sg::kernels
