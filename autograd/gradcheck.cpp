#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"

namespace sg {

namespace {
// <f(inputs), weights>: a scalar whose gradient is the vector-Jacobian product with `weights`.
double weighted_output(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                       const Tensor& weights) {
  NoGradGuard no_grad;
  return sum(mul(fn(inputs).to(DType::f64), weights)).item();
}
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                          GradcheckOptions options) {
  for (Tensor input : inputs)  // start from clean .grad (handles share the impl)
    if (input.defined() && input.requires_grad()) input.set_grad(Tensor());

  Tensor output = fn(inputs);
  SG_CHECK(output.requires_grad(), "gradcheck: the function's output does not require grad");
  Generator generator(1234);
  const Tensor weights = randn(output.sizes(), {DType::f64}, &generator);
  output.backward(weights.to(output.dtype()));

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& input = inputs[k];
    if (!input.defined() || !input.requires_grad()) continue;
    SG_CHECK(input.dtype() == DType::f64, "gradcheck: input ", k, " is ", input.dtype(),
             "; use f64 inputs (f32 finite differences are too noisy to judge)");
    const Tensor analytic = input.grad().defined() ? input.grad().contiguous() : zeros_like(input);
    // Perturb through a view of the input's own elements, so non-contiguous inputs work too.
    for (int64_t i = 0; i < input.numel(); ++i) {
      Shape index(input.dim());
      int64_t rest = i;
      for (int64_t d = input.dim() - 1; d >= 0; --d) {
        index[d] = rest % input.size(d);
        rest /= input.size(d);
      }
      Tensor element = input.detach();
      for (int64_t d = 0; d < input.dim(); ++d) element = select(element, 0, index[d]);
      double* value = element.data_ptr<double>();
      const double original = *value;
      *value = original + options.eps;
      const double plus = weighted_output(fn, inputs, weights);
      *value = original - options.eps;
      const double minus = weighted_output(fn, inputs, weights);
      *value = original;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double exact = analytic.reshape({-1}).select(0, i).item();
      if (!(std::abs(numeric - exact) <= options.atol + options.rtol * std::abs(numeric))) {
        std::ostringstream message;
        message << "gradcheck: input " << k << " (shape " << shape_str(input.sizes()) << "), element "
                << shape_str(index) << ": numeric " << numeric << " vs analytic " << exact;
        return {false, message.str()};
      }
    }
  }
  return {true, ""};
}

}  // namespace sg
