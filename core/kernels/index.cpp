#include "core/kernels/index.h"

#include "core/cpu/index_kernels.h"
#include "core/cuda/index_kernels.h"
#include "core/profiler.h"

// The device dispatch point for indexing kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

std::pair<int64_t, int64_t> index_range(const Tensor& index) {
  const profiler::RecordScope scope("index_range", profiler::Category::index, index);
  if (runs_on_cuda(index.device(), "index_range")) {
    if constexpr (kCudaBuild) return cuda::index_range(index);
  }
  return cpu::index_range(index);
}
void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const profiler::RecordScope scope("index_select", profiler::Category::index, x, index);
  if (runs_on_cuda(out.device(), "index_select")) {
    if constexpr (kCudaBuild) return cuda::index_select(out, x, dim, index);
  }
  cpu::index_select(out, x, dim, index);
}
void index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  const profiler::RecordScope scope("index_add", profiler::Category::index, index, src);
  if (runs_on_cuda(dst.device(), "index_add")) {
    if constexpr (kCudaBuild) return cuda::index_add(dst, dim, index, src);
  }
  cpu::index_add(dst, dim, index, src);
}
void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const profiler::RecordScope scope("gather", profiler::Category::index, x, index);
  if (runs_on_cuda(out.device(), "gather")) {
    if constexpr (kCudaBuild) return cuda::gather(out, x, dim, index);
  }
  cpu::gather(out, x, dim, index);
}
void scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  const profiler::RecordScope scope("scatter_add", profiler::Category::index, index, src);
  if (runs_on_cuda(dst.device(), "scatter_add")) {
    if constexpr (kCudaBuild) return cuda::scatter_add(dst, dim, index, src);
  }
  cpu::scatter_add(dst, dim, index, src);
}
void one_hot(const Tensor& out, const Tensor& indices) {
  const profiler::RecordScope scope("one_hot", profiler::Category::index, indices);
  if (runs_on_cuda(out.device(), "one_hot")) {
    if constexpr (kCudaBuild) return cuda::one_hot(out, indices);
  }
  cpu::one_hot(out, indices);
}
void triangle(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const profiler::RecordScope scope(lower ? "tril" : "triu", profiler::Category::index, x);
  if (runs_on_cuda(out.device(), lower ? "tril" : "triu")) {
    if constexpr (kCudaBuild) return cuda::triangle(out, x, diagonal, lower);
  }
  cpu::triangle(out, x, diagonal, lower);
}

}  // namespace sg::kernels
