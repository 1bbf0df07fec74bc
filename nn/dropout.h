#pragma once
// defines: nn::Dropout — zeroes elements with probability p while training (nn/functional.h: dropout).
#include "core/generator.h"
#include "nn/module.h"

namespace sg::nn {

// In training mode each element is zeroed with probability p and the others are scaled by
// 1 / (1 - p); in eval mode the input passes through unchanged. The masks are drawn from
// `generator` (not owned; the default generator when null).
class Dropout : public Module {
public:
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

  double p;
  Generator* generator;
};

}  // namespace sg::nn
