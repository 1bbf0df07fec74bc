// The CUDA kernel of GradScaler::unscale_: one elementwise pass (core/cuda/elementwise.cuh) that
// multiplies each gradient element by 1/scale and checks it for inf/NaN (core/amp_math.h, as the
// CPU kernel). The flag stays on the GPU: a thread that meets a non-finite element writes 1 into
// found_inf. Several threads may write it, always the same value, and the host never waits for it.
#include "core/amp_math.h"
#include "core/cuda/amp_kernels.h"
#include "core/cuda/elementwise.cuh"

namespace sg::cuda {

namespace {

template <typename scalar_t>
struct UnscaleElement {
  opmath_t<scalar_t> inv_scale;
  float* found_inf;
  __device__ void operator()(char* const* pointers) const {
    scalar_t& grad = *reinterpret_cast<scalar_t*>(pointers[0]);
    bool found = false;
    grad = scalar_t(math::unscale_element(opmath_t<scalar_t>(grad), inv_scale, found));
    if (found) *found_inf = 1.0f;
  }
};

}  // namespace

void non_finite_check_and_unscale_(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  const DeviceGuard guard(grad.device().index);
  SG_DISPATCH_FLOATING(grad.dtype(), "non_finite_check_and_unscale_", [&]<typename scalar_t>() {
    gpu_elementwise(describe_operands<1>(grad.sizes(), {&grad}, "non_finite_check_and_unscale_"),
                    UnscaleElement<scalar_t>{static_cast<opmath_t<scalar_t>>(inv_scale),
                                             static_cast<float*>(found_inf.raw_data())});
  });
}

}  // namespace sg::cuda
