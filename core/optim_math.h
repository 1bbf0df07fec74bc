#pragma once
// defines: AdamStep, SGDStep (the hyperparameters of one optimizer step, as core sees them) and
//          the per-element update math shared by the CPU and the CUDA kernels.
//
// Note [Optimizer updates follow PyTorch's single-tensor code]
// Each formula below is PyTorch 2.x's `_single_tensor_adam` / `_single_tensor_sgd`
// (torch/optim/adam.py, sgd.py) written for one element, in the same order of operations, so an
// f32 or f64 run reproduces PyTorch's values up to the rounding of fused multiply-adds. The
// scalars that do not depend on the element (bias corrections, step size) are computed once per
// parameter in double, as Python does, then rounded to the compute type, as PyTorch's kernels
// round a Python float argument. 16-bit parameters compute in float and round once per store
// (PyTorch's unfused path rounds after every op; its fused path does what we do).
#include <cmath>
#include <cstdint>

#include "core/pointwise_math.h"

namespace sg {

struct AdamStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * weight_decay before the update
  bool amsgrad = false;
  bool maximize = false;
  int64_t step = 1;  // this parameter's step count, already incremented (1 on the first step)
};

struct SGDStep {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  bool first_step = false;  // the momentum buffer is new: it starts as the gradient itself
};

namespace math {

// AdamStep's per-parameter scalars, in the compute type T.
template <typename T>
struct AdamScalars {
  T one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay_factor, neg_step_size, bias_correction2_sqrt;
  bool decoupled_weight_decay, amsgrad, maximize;
};

template <typename T>
AdamScalars<T> adam_scalars(const AdamStep& s) {
  const double bias_correction1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
  const double bias_correction2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
  return {T(1.0 - s.beta1),
          T(s.beta2),
          T(1.0 - s.beta2),
          T(s.eps),
          T(s.weight_decay),
          T(1.0 - s.lr * s.weight_decay),
          T(-(s.lr / bias_correction1)),
          T(std::sqrt(bias_correction2)),
          s.decoupled_weight_decay,
          s.amsgrad,
          s.maximize};
}

// a + w * (b - a), in PyTorch's two forms: the one that is exact at w = 0 for small w, the one
// exact at w = 1 for large w (ATen's Lerp.h).
template <typename T>
SG_HOST_DEVICE inline T lerp(T a, T b, T w) {
  const bool small = w < T(0.5) && w > T(-0.5);
  return small ? a + w * (b - a) : b - (b - a) * (T(1) - w);
}

// One element of Adam / AdamW. `max_exp_avg_sq` is read and written only with amsgrad.
template <typename T>
SG_HOST_DEVICE inline void adam_element(T& param, T grad, T& exp_avg, T& exp_avg_sq, T& max_exp_avg_sq,
                                        const AdamScalars<T>& s) {
  using std::sqrt;
  if (s.maximize) grad = -grad;
  if (s.decoupled_weight_decay) param = param * s.decay_factor;
  else if (s.weight_decay != T(0)) grad = grad + s.weight_decay * param;
  exp_avg = lerp(exp_avg, grad, s.one_minus_beta1);
  exp_avg_sq = exp_avg_sq * s.beta2 + s.one_minus_beta2 * grad * grad;
  T second_moment = exp_avg_sq;
  if (s.amsgrad) {
    max_exp_avg_sq = max_exp_avg_sq > exp_avg_sq ? max_exp_avg_sq : exp_avg_sq;
    second_moment = max_exp_avg_sq;
  }
  const T denom = sqrt(second_moment) / s.bias_correction2_sqrt + s.eps;
  param = param + s.neg_step_size * exp_avg / denom;
}

template <typename T>
struct SGDScalars {
  T lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, maximize, first_step;
};

template <typename T>
SGDScalars<T> sgd_scalars(const SGDStep& s) {
  return {T(s.lr), T(s.momentum), T(1.0 - s.dampening), T(s.weight_decay), s.nesterov, s.maximize, s.first_step};
}

// One element of SGD. `momentum_buffer` is read and written only when momentum != 0.
template <typename T>
SG_HOST_DEVICE inline void sgd_element(T& param, T grad, T& momentum_buffer, const SGDScalars<T>& s) {
  if (s.maximize) grad = -grad;
  if (s.weight_decay != T(0)) grad = grad + s.weight_decay * param;
  if (s.momentum != T(0)) {
    momentum_buffer = s.first_step ? grad : momentum_buffer * s.momentum + s.one_minus_dampening * grad;
    grad = s.nesterov ? grad + s.momentum * momentum_buffer : momentum_buffer;
  }
  param = param + (-s.lr) * grad;
}

}  // namespace math
}  // namespace sg
