#pragma once
// defines: nn::Flatten, nn::Identity — the shape-only layers.
#include "nn/module.h"

namespace sg::nn {

// Flattens dims start_dim..end_dim into one; the default keeps the batch dim: [N, C, H, W] -> [N, C*H*W].
class Flatten : public Module {
public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

// Returns its input: a placeholder where a layer is optional (e.g. a ResNet shortcut).
class Identity : public Module {
public:
  Tensor forward(const Tensor& input) override { return input; }
  std::string type_name() const override { return "Identity"; }
};

}  // namespace sg::nn
