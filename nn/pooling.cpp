#include "nn/pooling.h"

namespace sg::nn {

namespace {
// PyTorch prints a pooling size as the user gave it, an int or a tuple; equal sides read as an int.
std::string size_repr(Size2 size) { return size.h == size.w ? std::to_string(size.h) : size.str(); }
}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel_size, MaxPool2dOptions options) : kernel_size_(kernel_size), options_(options) {}

Tensor MaxPool2d::forward(const Tensor& input) {
  return max_pool2d(input, kernel_size_, options_.stride, options_.padding, options_.dilation, options_.ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + size_repr(kernel_size_) + ", stride=" + size_repr(options_.stride.value_or(kernel_size_)) +
         ", padding=" + size_repr(options_.padding) + ", dilation=" + size_repr(options_.dilation) +
         ", ceil_mode=" + (options_.ceil_mode ? "True" : "False");
}

AvgPool2d::AvgPool2d(Size2 kernel_size, AvgPool2dOptions options) : kernel_size_(kernel_size), options_(options) {}

Tensor AvgPool2d::forward(const Tensor& input) {
  return avg_pool2d(input, kernel_size_, options_.stride, options_.padding, options_.ceil_mode,
                    options_.count_include_pad, options_.divisor_override);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + size_repr(kernel_size_) + ", stride=" + size_repr(options_.stride.value_or(kernel_size_)) +
         ", padding=" + size_repr(options_.padding);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) { return adaptive_avg_pool2d(input, output_size_); }

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + size_repr(output_size_); }

}  // namespace sg::nn
