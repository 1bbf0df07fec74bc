#include "core/kernels/pointwise.h"

#include "core/cpu/pointwise_kernels.h"
#include "core/cuda/pointwise_kernels.h"
#include "core/profiler.h"

// The device dispatch point for pointwise kernels (Note [Kernel dispatch] in core/device.h).
namespace sg::kernels {

void copy(const Tensor& dst, const Tensor& src) {
  const profiler::RecordScope scope("copy", profiler::Category::copy, src);
  // Either side on a GPU: cuda::copy also moves bytes between host and device.
  const bool dst_on_gpu = runs_on_cuda(dst.device(), "copy"), src_on_gpu = runs_on_cuda(src.device(), "copy");
  if (dst_on_gpu || src_on_gpu) {
    if constexpr (kCudaBuild) return cuda::copy(dst, src);
  }
  cpu::copy(dst, src);
}
Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out(std::make_shared<TensorImpl>(std::make_shared<Storage>(t.numel() * t.element_size(), t.device()), 0,
                                          t.sizes(), contiguous_strides(t.sizes()), t.dtype()));
  copy(out, t);
  return out;
}

void fill(const Tensor& dst, double value) {
  const profiler::RecordScope scope("fill", profiler::Category::pointwise, dst);
  if (runs_on_cuda(dst.device(), "fill")) {
    if constexpr (kCudaBuild) return cuda::fill(dst, value);
  }
  cpu::fill(dst, value);
}
void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  const profiler::RecordScope scope(unary_op_name(op), profiler::Category::pointwise, in);
  if (runs_on_cuda(out.device(), "unary")) {
    if constexpr (kCudaBuild) return cuda::unary(op, out, in);
  }
  cpu::unary(op, out, in);
}
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  const profiler::RecordScope scope(binary_op_name(op), profiler::Category::pointwise, a, b);
  if (runs_on_cuda(out.device(), "binary")) {
    if constexpr (kCudaBuild) return cuda::binary(op, out, a, b, alpha);
  }
  cpu::binary(op, out, a, b, alpha);
}
void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max) {
  const profiler::RecordScope scope("clamp", profiler::Category::pointwise, in);
  if (runs_on_cuda(out.device(), "clamp")) {
    if constexpr (kCudaBuild) return cuda::clamp(out, in, min, max);
  }
  cpu::clamp(out, in, min, max);
}
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  const profiler::RecordScope scope("where", profiler::Category::pointwise, condition, a, b);
  if (runs_on_cuda(out.device(), "where")) {
    if constexpr (kCudaBuild) return cuda::where(out, condition, a, b);
  }
  cpu::where(out, condition, a, b);
}

}  // namespace sg::kernels
