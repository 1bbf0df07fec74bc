#include "core/kernels/softmax.h"

#include "core/cpu/softmax_kernels.h"
#include "core/cuda/softmax_kernels.h"
#include "core/profiler.h"

// The device dispatch point for softmax (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void softmax(SoftmaxKind kind, const Tensor& out, const Tensor& in, int64_t dim) {
  const profiler::RecordScope scope(softmax_name(kind), profiler::Category::softmax, in);
  if (runs_on_cuda(in.device(), softmax_name(kind))) {
    if constexpr (kCudaBuild) return cuda::softmax(kind, out, in, dim);
  }
  cpu::softmax(kind, out, in, dim);
}

void softmax_backward(SoftmaxKind kind, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim) {
  const profiler::RecordScope scope(kind == SoftmaxKind::softmax ? "softmax_backward" : "log_softmax_backward",
                                    profiler::Category::softmax, grad_out);
  if (runs_on_cuda(out.device(), softmax_name(kind))) {
    if constexpr (kCudaBuild) return cuda::softmax_backward(kind, grad_in, grad_out, out, dim);
  }
  cpu::softmax_backward(kind, grad_in, grad_out, out, dim);
}

}  // namespace sg::kernels
