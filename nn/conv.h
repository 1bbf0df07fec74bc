#pragma once
// defines: nn::Conv2d, nn::Conv2dOptions — the 2-D convolution layer, with PyTorch's options,
//          defaults and initialisation.
#include <string>

#include "autograd/ops_conv.h"  // defines: conv2d, Size2
#include "core/generator.h"
#include "nn/module.h"

namespace sg::nn {

// Defaults are torch.nn.Conv2d's. Written as nn::Conv2d(1, 32, 5, {.padding = 2}).
struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  Generator* generator = nullptr;  // draws the initial parameters; the default generator when null
};

// y = conv2d(x, weight, bias) with weight [out_channels, in_channels / groups, kernel_h, kernel_w]
// and bias [out_channels]. Both start uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
// in_channels / groups * kernel_h * kernel_w: what PyTorch's kaiming_uniform_(a = sqrt(5)) gives
// the weight, and its rule for the bias.
class Conv2d : public Module {
public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Conv2d"; }
  // As PyTorch prints it: "1, 32, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2)".
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;  // undefined when options.bias is false

private:
  int64_t in_channels_;
  int64_t out_channels_;
  Size2 kernel_size_;
  Conv2dOptions options_;
};

}  // namespace sg::nn
