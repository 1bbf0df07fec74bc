#pragma once
// defines: nn::Linear — y = x W^T + b.
#include "core/generator.h"
#include "nn/module.h"

namespace sg::nn {

// weight [out_features, in_features], bias [out_features]; both start as PyTorch's do:
// U(-1/sqrt(in_features), 1/sqrt(in_features)) (kaiming_uniform_ with a = sqrt(5) for the weight).
// The input is [..., in_features]; the output [..., out_features].
class Linear : public Module {
public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  // Draws fresh initial values, as at construction.
  void reset_parameters(Generator* generator = nullptr);

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias is undefined without one
};

}  // namespace sg::nn
