#pragma once
// defines: gradcheck — compare autograd's gradients with central finite differences.
#include <functional>
#include <string>

#include "core/tensor.h"

namespace sg {

struct GradcheckOptions {
  double eps = 1e-6;  // finite-difference step
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: which input, which element, numeric vs analytic
};

// `fn` maps the inputs to one output tensor. Every floating input that requires grad is
// checked: for each element i, (f(x + eps e_i) - f(x - eps e_i)) / 2eps, contracted with a
// fixed random output gradient, must match the gradient autograd computes. Inputs should be
// f64 (f32 differences are too noisy); they are perturbed in place and restored.
GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                          GradcheckOptions options = {});

}  // namespace sg
