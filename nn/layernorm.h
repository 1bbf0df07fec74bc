#pragma once
// defines: nn::LayerNorm — normalisation over the last dims of each sample, as torch.nn.LayerNorm
//          (the op itself: autograd/ops_norm.h).
#include "nn/module.h"

namespace sg::nn {

// The input's last dims must equal normalized_shape; each such block is normalised to zero mean
// and unit (biased) variance, then scaled by weight (ones) and shifted by bias (zeros), both of
// normalized_shape, when elementwise_affine.
class LayerNorm : public Module {
public:
  // LayerNorm({C}) for the usual last-dim normalisation.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;  // undefined unless elementwise_affine
};

}  // namespace sg::nn
