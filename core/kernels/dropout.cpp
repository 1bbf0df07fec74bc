#include "core/kernels/dropout.h"

#include "core/cpu/dropout_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"
#include "core/profiler.h"

// The device dispatch point for dropout (Note [Kernel dispatch] in core/device.h). The CPU has its
// one-pass kernel; a GPU runs the three passes the contract defines, with its own fill and
// pointwise kernels, so that both draw the same masks.
namespace sg::kernels {

namespace {

// keep / (1 - p) in `dtype`: what the three-pass dropout multiplies by.
Tensor mask_of(const Tensor& keep, double p, DType dtype) {
  Tensor mask = empty(keep.sizes(), {dtype, keep.device()});
  copy(mask, keep);
  if (p < 1) binary(BinaryOp::mul, mask, mask, full({}, 1.0 / (1.0 - p), {dtype, keep.device()}));
  return mask;
}

}  // namespace

void dropout(const Tensor& out, const Tensor& keep, const Tensor& input, double p, Generator& generator) {
  const profiler::RecordScope scope("dropout", profiler::Category::random, input);
  if (!out.device().is_cpu()) {
    bernoulli_(keep, 1 - p, generator);
    binary(BinaryOp::mul, out, input, mask_of(keep, p, input.dtype()));
    return;
  }
  const uint64_t first = generator.reserve(static_cast<uint64_t>((input.numel() + 1) / 2));  // as bernoulli_'s
  cpu::dropout(out, keep, contiguous(input), p, generator.seed(), first);
}

void dropout_backward(const Tensor& grad_input, const Tensor& grad, const Tensor& keep, double p) {
  const profiler::RecordScope scope("dropout_backward", profiler::Category::pointwise, grad);
  if (!grad.device().is_cpu()) return binary(BinaryOp::mul, grad_input, grad, mask_of(keep, p, grad.dtype()));
  cpu::dropout_backward(grad_input, grad, keep, p);
}

}  // namespace sg::kernels
