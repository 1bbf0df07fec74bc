#include "core/kernels/pool.h"

#include "core/cpu/pool_kernels.h"
#include "core/cuda/pool_kernels.h"
#include "core/profiler.h"

// The device dispatch point for pooling (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window) {
  const profiler::RecordScope scope("max_pool2d", profiler::Category::pool, input);
  if (runs_on_cuda(out.device(), "max_pool2d")) {
    if constexpr (kCudaBuild) return cuda::max_pool2d(out, indices, input, window);
  }
  cpu::max_pool2d(out, indices, input, window);
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dWindow& window) {
  const profiler::RecordScope scope("max_pool2d_backward", profiler::Category::pool, grad_out);
  if (runs_on_cuda(grad_input.device(), "max_pool2d_backward")) {
    if constexpr (kCudaBuild) return cuda::max_pool2d_backward(grad_input, grad_out, indices, window);
  }
  cpu::max_pool2d_backward(grad_input, grad_out, indices);
}

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dWindow& window, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  const profiler::RecordScope scope("avg_pool2d", profiler::Category::pool, input);
  if (runs_on_cuda(out.device(), "avg_pool2d")) {
    if constexpr (kCudaBuild) return cuda::avg_pool2d(out, input, window, count_include_pad, divisor_override);
  }
  cpu::avg_pool2d(out, input, window, count_include_pad, divisor_override);
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dWindow& window,
                         bool count_include_pad, std::optional<int64_t> divisor_override) {
  const profiler::RecordScope scope("avg_pool2d_backward", profiler::Category::pool, grad_out);
  if (runs_on_cuda(grad_input.device(), "avg_pool2d_backward")) {
    if constexpr (kCudaBuild)
      return cuda::avg_pool2d_backward(grad_input, grad_out, window, count_include_pad, divisor_override);
  }
  cpu::avg_pool2d_backward(grad_input, grad_out, window, count_include_pad, divisor_override);
}

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input) {
  const profiler::RecordScope scope("adaptive_avg_pool2d", profiler::Category::pool, input);
  if (runs_on_cuda(out.device(), "adaptive_avg_pool2d")) {
    if constexpr (kCudaBuild) return cuda::adaptive_avg_pool2d(out, input);
  }
  cpu::adaptive_avg_pool2d(out, input);
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  const profiler::RecordScope scope("adaptive_avg_pool2d_backward", profiler::Category::pool, grad_out);
  if (runs_on_cuda(grad_input.device(), "adaptive_avg_pool2d_backward")) {
    if constexpr (kCudaBuild) return cuda::adaptive_avg_pool2d_backward(grad_input, grad_out);
  }
  cpu::adaptive_avg_pool2d_backward(grad_input, grad_out);
}

}  // namespace sg::kernels
