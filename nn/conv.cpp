#include "nn/conv.h"

#include <cmath>

#include "core/factory.h"
#include "core/kernels/random.h"

namespace sg::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options)
    : in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      options_(options) {
  SG_CHECK(in_channels > 0 && out_channels > 0, "Conv2d: channels must be positive, got in_channels=", in_channels,
           ", out_channels=", out_channels);
  SG_CHECK(kernel_size.h > 0 && kernel_size.w > 0, "Conv2d: kernel_size must be positive, got ", kernel_size.str());
  SG_CHECK(options.groups > 0 && in_channels % options.groups == 0 && out_channels % options.groups == 0,
           "Conv2d: groups=", options.groups, " must divide in_channels=", in_channels,
           " and out_channels=", out_channels);
  Generator& generator = options.generator != nullptr ? *options.generator : default_generator();
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
  const int64_t fan_in = in_channels / options.groups * kernel_size.h * kernel_size.w;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight =
      register_parameter("weight", empty({out_channels, in_channels / options.groups, kernel_size.h, kernel_size.w}));
  kernels::uniform_(weight, -bound, bound, generator);
  if (options.bias) {
    bias = register_parameter("bias", empty({out_channels}));
    kernels::uniform_(bias, -bound, bound, generator);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return conv2d(input, weight, bias, options_.stride, options_.padding, options_.dilation, options_.groups);
}

std::string Conv2d::extra_repr() const {
  std::string repr = std::to_string(in_channels_) + ", " + std::to_string(out_channels_) +
                     ", kernel_size=" + kernel_size_.str() + ", stride=" + options_.stride.str();
  if (options_.padding != Size2(0)) repr += ", padding=" + options_.padding.str();
  if (options_.dilation != Size2(1)) repr += ", dilation=" + options_.dilation.str();
  if (options_.groups != 1) repr += ", groups=" + std::to_string(options_.groups);
  if (!options_.bias) repr += ", bias=False";
  return repr;
}

}  // namespace sg::nn
