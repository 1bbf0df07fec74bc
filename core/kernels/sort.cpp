#include "core/kernels/sort.h"

#include "core/cpu/sort_kernels.h"
#include "core/cuda/sort_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the sorting kernel (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void sorted_positions(const Tensor& positions, const Tensor& x, bool descending) {
  const profiler::RecordScope scope("sort", profiler::Category::sort, x);
  if (runs_on_cuda(x.device(), "sort")) {
    if constexpr (kCudaBuild) return cuda::sorted_positions(positions, x, descending);
  }
  cpu::sorted_positions(positions, x, descending);
}

}  // namespace sg::kernels
