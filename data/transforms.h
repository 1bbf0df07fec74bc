#pragma once
// defines: Transform, ToFloat, Normalize, Compose — per-example tensor transforms as in
//          torchvision.transforms. They run on DataLoader worker threads, so they are plain
//          loops (Note [Data code does not use the thread pool] in data/plain_copy.h).
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace sg::data {

// Any callable from tensor to tensor; the classes below are the common ones.
using Transform = std::function<Tensor(const Tensor&)>;

// u8 pixels in [0, 255] to f32 in [0, 1] (the value scaling of torchvision's ToTensor); same shape.
struct ToFloat {
  Tensor operator()(const Tensor& image) const;
};

// (x - mean[c]) / std[c] for each channel c of a floating [C, ...] tensor; a single mean and std
// apply to every channel. Returns a new tensor (torchvision's Normalize with inplace=False).
class Normalize {
public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& image) const;

private:
  std::vector<double> mean_;
  std::vector<double> std_;
};

// Applies the transforms in order.
class Compose {
public:
  explicit Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {}
  Tensor operator()(const Tensor& image) const;

private:
  std::vector<Transform> transforms_;
};

}  // namespace sg::data
