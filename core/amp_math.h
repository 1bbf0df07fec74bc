#pragma once
// defines: math::unscale_element — the per-element math of GradScaler::unscale_, shared by the
//          CPU and the CUDA kernel.
#include <cmath>

#include "core/pointwise_math.h"  // defines: SG_HOST_DEVICE

namespace sg::math {

// Returns grad * inv_scale and records in found_inf whether grad was inf or NaN. The check is on
// the scaled gradient as backward produced it (torch's _amp_foreach_non_finite_check_and_unscale_):
// an overflow in backward shows up there as inf, or as NaN where inf met inf or 0.
template <typename T>
SG_HOST_DEVICE inline T unscale_element(T grad, T inv_scale, bool& found_inf) {
  using std::isfinite;
  found_inf = found_inf || !isfinite(grad);
  return grad * inv_scale;
}

}  // namespace sg::math
