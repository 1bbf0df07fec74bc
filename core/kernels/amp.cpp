#include "core/kernels/amp.h"

#include "core/cpu/amp_kernels.h"
#include "core/cuda/amp_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the mixed-precision kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void non_finite_check_and_unscale_(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  const profiler::RecordScope scope("non_finite_check_and_unscale_", profiler::Category::amp, grad);
  SG_CHECK(is_floating(grad.dtype()), "non_finite_check_and_unscale_: expected a floating gradient, got ",
           grad.dtype());
  SG_CHECK(found_inf.numel() == 1 && found_inf.dtype() == DType::f32, "non_finite_check_and_unscale_: found_inf must ",
           "be a one-element f32 tensor, got ", found_inf.dtype(), " ", shape_str(found_inf.sizes()));
  SG_CHECK(found_inf.device() == grad.device(), "non_finite_check_and_unscale_: found_inf is on ", found_inf.device(),
           " but the gradient is on ", grad.device());
  if (runs_on_cuda(grad.device(), "non_finite_check_and_unscale_")) {
    if constexpr (kCudaBuild) return cuda::non_finite_check_and_unscale_(grad, found_inf, inv_scale);
  }
  cpu::non_finite_check_and_unscale_(grad, found_inf, inv_scale);
}

}  // namespace sg::kernels
