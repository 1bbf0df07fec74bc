#pragma once
// defines: nn::RMSNorm — root-mean-square normalisation over the last dims, as torch.nn.RMSNorm.
//          Written with tensor ops only: autograd derives its backward (docs/new-layer.md uses it
//          as the example of a composite layer).
#include <optional>

#include "nn/module.h"

namespace sg::nn {

// y = x / sqrt(mean(x^2 over normalized_shape) + eps) * weight. The input's last dims must equal
// normalized_shape; weight (ones, of normalized_shape) exists when elementwise_affine. Without an
// eps, the machine epsilon of the input's dtype is used, as PyTorch does.
class RMSNorm : public Module {
public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "RMSNorm"; }
  std::string extra_repr() const override;

  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;  // undefined unless elementwise_affine
};

}  // namespace sg::nn
