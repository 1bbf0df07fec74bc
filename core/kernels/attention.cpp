#include "core/kernels/attention.h"

#include "core/cpu/attention_kernels.h"
#include "core/cuda/attention_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/profiler.h"

// The device dispatch point for the fused attention (see core/kernels/pointwise.cpp).
namespace sg::kernels {

namespace {

// The CUDA kernel reads and writes contiguous tensors. Where the front laid out an output or a
// gradient otherwise (as the heads' views are laid out), the kernel writes into a contiguous
// tensor that is then copied over, and reads a contiguous copy.
Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : empty(t.sizes(), {t.dtype(), t.device()}); }
void copy_back(const Tensor& to, const Tensor& from) {
  if (to.impl() != from.impl()) copy(to, from);
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& log_sum_exp, const Tensor& dropout_keep, const Tensor& q,
                       const Tensor& k, const Tensor& v, const AttentionArgs& args) {
  const profiler::RecordScope scope("attention_forward", profiler::Category::attention, q, k, v);
  if (runs_on_cuda(q.device(), "scaled_dot_product_attention")) {
    if constexpr (kCudaBuild) {
      const Tensor dense_out = dense(out);
      cuda::attention_forward(dense_out, log_sum_exp, q, k, v, args);
      return copy_back(out, dense_out);
    }
  }
  cpu::attention_forward(out, log_sum_exp, dropout_keep, q, k, v, args);
}

void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& log_sum_exp,
                        const Tensor& dropout_keep, const AttentionArgs& args) {
  const profiler::RecordScope scope("attention_backward", profiler::Category::attention, grad_out, q, k, v);
  if (runs_on_cuda(q.device(), "scaled_dot_product_attention")) {
    if constexpr (kCudaBuild) {
      const Tensor dense_q = dense(grad_q), dense_k = dense(grad_k), dense_v = dense(grad_v);
      cuda::attention_backward(dense_q, dense_k, dense_v, contiguous(grad_out), q, k, v, contiguous(out), log_sum_exp,
                               args);
      copy_back(grad_q, dense_q);
      copy_back(grad_k, dense_k);
      return copy_back(grad_v, dense_v);
    }
  }
  cpu::attention_backward(grad_q, grad_k, grad_v, grad_out, q, k, v, out, log_sum_exp, dropout_keep, args);
}

void attention_dropout_keep(const Tensor& keep, const AttentionArgs& args) {
  const profiler::RecordScope scope("attention_dropout_keep", profiler::Category::random, keep);
  SG_CHECK(keep.device().is_cpu(), "attention_dropout_keep: the mask is drawn on the CPU, got ", keep.device());
  cpu::attention_dropout_keep(keep, args);
}

}  // namespace sg::kernels
