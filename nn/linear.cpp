#include "nn/linear.h"

#include <cmath>

#include "autograd/ops_linalg.h"
#include "core/factory.h"
#include "nn/init.h"

namespace sg::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator* generator)
    : in_features(in_features),
      out_features(out_features) {
  SG_CHECK(in_features >= 0 && out_features >= 0, "Linear: feature counts must be non-negative, got in_features ",
           in_features, ", out_features ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (bias) this->bias = register_parameter("bias", empty({out_features}));
  reset_parameters(generator);
}

void Linear::reset_parameters(Generator* generator) {
  // a = sqrt(5) makes kaiming_uniform_'s bound gain * sqrt(3 / fan_in) = sqrt(1/3) * sqrt(3 / fan_in)
  // = 1 / sqrt(fan_in): the bound the bias uses too.
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::fan_in, init::Nonlinearity::leaky_relu, generator);
  if (!bias.defined()) return;
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  init::uniform_(bias, -bound, bound, generator);
}

Tensor Linear::forward(const Tensor& input) {
  SG_CHECK(input.dim() >= 1 && input.size(-1) == in_features, "Linear: input of shape ", shape_str(input.sizes()),
           " does not match weight of shape ", shape_str(weight.sizes()),
           " (the input's last dim must be in_features = ", in_features, ")");
  return linear(input, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

}  // namespace sg::nn
