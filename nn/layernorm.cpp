#include "nn/layernorm.h"

#include <sstream>
#include <utility>

#include "autograd/ops_norm.h"
#include "core/factory.h"

namespace sg::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)),
      eps(eps),
      elementwise_affine(elementwise_affine) {
  SG_CHECK(!this->normalized_shape.empty(), "LayerNorm: normalized_shape must have at least one dim");
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(this->normalized_shape));
    bias = register_parameter("bias", zeros(this->normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& input) { return layer_norm(input, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  std::ostringstream out;
  out << shape_str(normalized_shape) << ", eps=" << eps
      << ", elementwise_affine=" << (elementwise_affine ? "True" : "False");
  return out.str();
}

}  // namespace sg::nn
