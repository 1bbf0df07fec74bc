#include "nn/activation.h"

#include <utility>

#include "autograd/ops_pointwise.h"

namespace sg::nn {

Tensor ReLU::forward(const Tensor& input) {
  if (!inplace) return relu(input);
  Tensor out = input;  // the same tensor: relu_ rebinds its history
  return out.relu_();
}

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  SG_CHECK(this->approximate == "none" || this->approximate == "tanh",
           "GELU: approximate must be \"none\" or \"tanh\", got \"", this->approximate, "\"");
}

Tensor GELU::forward(const Tensor& input) { return gelu(input, /*tanh_approximation=*/approximate == "tanh"); }

std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }

}  // namespace sg::nn
