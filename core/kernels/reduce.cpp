#include "core/kernels/reduce.h"

#include "core/cpu/reduce_kernels.h"
#include "core/cuda/reduce_kernels.h"
#include "core/profiler.h"

// The device dispatch point for reductions (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void sum(const Tensor& out, const Tensor& in, const Shape& dims) {
  const profiler::RecordScope scope("sum", profiler::Category::reduce, in);
  if (runs_on_cuda(in.device(), "sum")) {
    if constexpr (kCudaBuild) return cuda::sum(out, in, dims);
  }
  cpu::sum(out, in, dims);
}

void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims) {
  const profiler::RecordScope scope(which == Extremum::max ? "max" : "min", profiler::Category::reduce, in);
  if (runs_on_cuda(in.device(), which == Extremum::max ? "max" : "min")) {
    if constexpr (kCudaBuild) return cuda::extremum(which, values, indices, in, dims);
  }
  cpu::extremum(which, values, indices, in, dims);
}

void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction) {
  const profiler::RecordScope scope("var", profiler::Category::reduce, in);
  if (runs_on_cuda(in.device(), "var")) {
    if constexpr (kCudaBuild) return cuda::var(out, in, dims, correction);
  }
  cpu::var(out, in, dims, correction);
}

void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p) {
  const profiler::RecordScope scope("norm", profiler::Category::reduce, in);
  if (runs_on_cuda(in.device(), "norm")) {
    if constexpr (kCudaBuild) return cuda::norm(out, in, dims, p);
  }
  cpu::norm(out, in, dims, p);
}

void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims) {
  const profiler::RecordScope scope("logsumexp", profiler::Category::reduce, in);
  if (runs_on_cuda(in.device(), "logsumexp")) {
    if constexpr (kCudaBuild) return cuda::logsumexp(out, in, dims);
  }
  cpu::logsumexp(out, in, dims);
}

}  // namespace sg::kernels
