#pragma once
// defines: nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d and their options — the pooling
//          layers, with PyTorch's defaults. They hold no parameters.
#include <optional>
#include <string>

#include "autograd/ops_conv.h"  // defines: max_pool2d, avg_pool2d, adaptive_avg_pool2d, Size2
#include "nn/module.h"

namespace sg::nn {

struct MaxPool2dOptions {
  std::optional<Size2> stride = std::nullopt;  // kernel_size when not given
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};

// Written as nn::MaxPool2d(2) or nn::MaxPool2d(3, {.stride = 2, .padding = 1}).
class MaxPool2d : public Module {
public:
  explicit MaxPool2d(Size2 kernel_size, MaxPool2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "MaxPool2d"; }
  // "kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False" (a size prints as one number
  // when its height and width are equal).
  std::string extra_repr() const override;

private:
  Size2 kernel_size_;
  MaxPool2dOptions options_;
};

struct AvgPool2dOptions {
  std::optional<Size2> stride = std::nullopt;  // kernel_size when not given
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override = std::nullopt;
};

class AvgPool2d : public Module {
public:
  explicit AvgPool2d(Size2 kernel_size, AvgPool2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;  // "kernel_size=2, stride=2, padding=0"

private:
  Size2 kernel_size_;
  AvgPool2dOptions options_;
};

// Averages each plane down to output_size, whatever the input's size (ResNet's global pooling is (1, 1)).
class AdaptiveAvgPool2d : public Module {
public:
  explicit AdaptiveAvgPool2d(Size2 output_size) : output_size_(output_size) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;  // "output_size=1"

private:
  Size2 output_size_;
};

}  // namespace sg::nn
