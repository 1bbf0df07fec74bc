#include "core/kernels/attention.h"

#include "core/cpu/attention_kernels.h"
#include "core/cuda/attention_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the fused attention (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionArgs& args) {
  const profiler::RecordScope scope("attention_forward", profiler::Category::attention, q, k, v);
  if (runs_on_cuda(q.device(), "scaled_dot_product_attention")) {
    if constexpr (kCudaBuild) return cuda::attention_forward(out, log_sum_exp, q, k, v, args);
  }
  cpu::attention_forward(out, log_sum_exp, q, k, v, args);
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const AttentionArgs& args) {
  const profiler::RecordScope scope("attention_backward", profiler::Category::attention, grad_out, q, k, v);
  if (runs_on_cuda(q.device(), "scaled_dot_product_attention")) {
    if constexpr (kCudaBuild)
      return cuda::attention_backward(grad_q, grad_k, grad_v, grad_out, q, k, v, out, log_sum_exp, args);
  }
  cpu::attention_backward(grad_q, grad_k, grad_v, grad_out, q, k, v, out, log_sum_exp, args);
}

void attention_dropout_keep(const Tensor& keep, const AttentionArgs& args) {
  const profiler::RecordScope scope("attention_dropout_keep", profiler::Category::random, keep);
  SG_CHECK(keep.device().is_cpu(), "attention_dropout_keep: the mask is drawn on the CPU, got ", keep.device());
  cpu::attention_dropout_keep(keep, args);
}

}  // namespace sg::kernels
