#pragma once
// defines: nn::ReLU, nn::GELU, nn::Tanh, nn::Sigmoid — the activations as modules (no parameters).
#include <string>

#include "nn/module.h"

namespace sg::nn {

// inplace: overwrite the input instead of writing a new tensor, as PyTorch's ReLU(inplace=True).
// The backward needs only the output, so nothing is allocated (Note [In place without a copy] in
// autograd/function.h); the input must not be needed by anything else's backward. It saves a
// temporary, not a peak: in models/resnet.cpp the BatchNorm output a ReLU would overwrite is saved
// by nothing and freed at once, and ResNet34's live peak (224², batch 4) is 386 MB either way.
class ReLU : public Module {
public:
  explicit ReLU(bool inplace = false) : inplace(inplace) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }

  bool inplace;
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
