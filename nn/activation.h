#pragma once
// defines: nn::ReLU, nn::GELU, nn::Tanh, nn::Sigmoid — the activations as modules (no parameters).
#include <string>

#include "nn/module.h"

namespace sg::nn {

class ReLU : public Module {
public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
};

// approximate: "none" (x * Phi(x), exact) or "tanh" (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))).
class GELU : public Module {
public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;

  std::string approximate;
};

class Tanh : public Module {
public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Tanh"; }
};

class Sigmoid : public Module {
public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sigmoid"; }
};

}  // namespace sg::nn
