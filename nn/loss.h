#pragma once
// defines: nn::CrossEntropyLoss, nn::MSELoss — the losses of nn/functional.h as modules, for
//          code that keeps its criterion as an object. Their forward takes (input, target).
#include <utility>

#include "nn/functional.h"
#include "nn/module.h"

namespace sg::nn {

class CrossEntropyLoss : public Module {
public:
  explicit CrossEntropyLoss(functional::CrossEntropyOptions options = {}) : options(std::move(options)) {}
  using Module::forward;  // the single-tensor forward stays visible (and throws)
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::cross_entropy(input, target, options);
  }
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  std::string type_name() const override { return "CrossEntropyLoss"; }

  functional::CrossEntropyOptions options;
};

class MSELoss : public Module {
public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::mse_loss(input, target, reduction); }
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  std::string type_name() const override { return "MSELoss"; }

  Reduction reduction;
};

}  // namespace sg::nn
