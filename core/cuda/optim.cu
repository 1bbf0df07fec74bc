// CUDA optimizer kernels: one elementwise pass (core/cuda/elementwise.cuh) that loads the
// parameter, its gradient and its state, runs the per-element math of core/optim_math.h in
// opmath_t — the function the CPU kernel runs — and stores the results. Elements are independent,
// so the GPU matches the CPU up to the compilers' contraction of multiply-adds into fma.
#include "core/cuda/elementwise.cuh"
#include "core/cuda/optim_kernels.h"

namespace sg::cuda {

namespace {

template <typename scalar_t>
__device__ inline scalar_t& element(char* const* pointers, int k) {
  return *reinterpret_cast<scalar_t*>(pointers[k]);
}

// Operands: param, grad, exp_avg, exp_avg_sq, and max_exp_avg_sq only with kAmsgrad.
template <typename scalar_t, bool kAmsgrad>
struct AdamElement {
  math::AdamScalars<opmath_t<scalar_t>> scalars;
  __device__ void operator()(char* const* pointers) const {
    using math_t = opmath_t<scalar_t>;
    scalar_t& param = element<scalar_t>(pointers, 0);
    scalar_t& exp_avg = element<scalar_t>(pointers, 2);
    scalar_t& exp_avg_sq = element<scalar_t>(pointers, 3);
    math_t p = param, m = exp_avg, v = exp_avg_sq, v_max = 0;
    if constexpr (kAmsgrad) v_max = element<scalar_t>(pointers, 4);
    math::adam_element<math_t>(p, math_t(element<scalar_t>(pointers, 1)), m, v, v_max, scalars);
    param = scalar_t(p);
    exp_avg = scalar_t(m);
    exp_avg_sq = scalar_t(v);
    if constexpr (kAmsgrad) element<scalar_t>(pointers, 4) = scalar_t(v_max);
  }
};

// Operands: param, grad, and momentum_buffer only with kMomentum.
template <typename scalar_t, bool kMomentum>
struct SGDElement {
  math::SGDScalars<opmath_t<scalar_t>> scalars;
  __device__ void operator()(char* const* pointers) const {
    using math_t = opmath_t<scalar_t>;
    scalar_t& param = element<scalar_t>(pointers, 0);
    math_t p = param, buffer = 0;
    if constexpr (kMomentum) buffer = element<scalar_t>(pointers, 2);
    math::sgd_element<math_t>(p, math_t(element<scalar_t>(pointers, 1)), buffer, scalars);
    param = scalar_t(p);
    if constexpr (kMomentum) element<scalar_t>(pointers, 2) = scalar_t(buffer);
  }
};

template <typename scalar_t>
void adam_step_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                     const Tensor& max_exp_avg_sq, const AdamStep& step) {
  const auto scalars = math::adam_scalars<opmath_t<scalar_t>>(step);
  const Shape& shape = param.sizes();
  if (step.amsgrad) {
    gpu_elementwise(describe_operands<5>(shape, {&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq}, "adam_step"),
                    AdamElement<scalar_t, true>{scalars});
  } else {
    gpu_elementwise(describe_operands<4>(shape, {&param, &grad, &exp_avg, &exp_avg_sq}, "adam_step"),
                    AdamElement<scalar_t, false>{scalars});
  }
}

template <typename scalar_t>
void sgd_step_typed(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step) {
  const auto scalars = math::sgd_scalars<opmath_t<scalar_t>>(step);
  const Shape& shape = param.sizes();
  if (step.momentum != 0.0) {
    gpu_elementwise(describe_operands<3>(shape, {&param, &grad, &momentum_buffer}, "sgd_step"),
                    SGDElement<scalar_t, true>{scalars});
  } else {
    gpu_elementwise(describe_operands<2>(shape, {&param, &grad}, "sgd_step"), SGDElement<scalar_t, false>{scalars});
  }
}

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& step) {
  const DeviceGuard guard(param.device().index);
  SG_DISPATCH_FLOATING(param.dtype(), "adam_step", [&]<typename scalar_t>() {
    adam_step_typed<scalar_t>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
  });
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDStep& step) {
  const DeviceGuard guard(param.device().index);
  SG_DISPATCH_FLOATING(param.dtype(), "sgd_step",
                       [&]<typename scalar_t>() { sgd_step_typed<scalar_t>(param, grad, momentum_buffer, step); });
}

}  // namespace sg::cuda
