#include "nn/basic.h"

#include "autograd/ops_shape.h"

namespace sg::nn {

Tensor Flatten::forward(const Tensor& input) { return flatten(input, start_dim, end_dim); }

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

}  // namespace sg::nn
