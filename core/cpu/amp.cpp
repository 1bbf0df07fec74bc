// The CPU kernel of GradScaler::unscale_: one strided pass over the gradient (core/cpu/loops.h,
// parallel over elements) that multiplies each element by 1/scale and checks it for inf/NaN.
#include <atomic>

#include "core/amp_math.h"
#include "core/cpu/amp_kernels.h"
#include "core/cpu/operands.h"

namespace sg::cpu {

void non_finite_check_and_unscale_(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  std::atomic<bool> any_non_finite{false};  // runs on several threads may find one
  SG_DISPATCH_FLOATING(grad.dtype(), "non_finite_check_and_unscale_", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const math_t inv = static_cast<math_t>(inv_scale);
    for_each_run<1>(grad.sizes(), make_operands<1>(grad.sizes(), {&grad}), [&](auto p, auto s, int64_t n) {
      bool found = false;  // per run, so the loop body has no shared write and vectorises
      if (s[0] == static_cast<int64_t>(sizeof(scalar_t))) {
        scalar_t* data = reinterpret_cast<scalar_t*>(p[0]);
        for (int64_t i = 0; i < n; ++i) data[i] = scalar_t(math::unscale_element<math_t>(math_t(data[i]), inv, found));
      } else {
        for (int64_t i = 0; i < n; ++i) {
          scalar_t& g = *reinterpret_cast<scalar_t*>(p[0] + i * s[0]);
          g = scalar_t(math::unscale_element<math_t>(math_t(g), inv, found));
        }
      }
      if (found) any_non_finite.store(true, std::memory_order_relaxed);
    });
  });
  if (any_non_finite.load()) *found_inf.data_ptr<float>() = 1.0f;
}

}  // namespace sg::cpu
