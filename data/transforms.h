#pragma once
// defines: Transform, RandomTransform, ToFloat, Normalize, Compose — per-example tensor
//          transforms as in torchvision.transforms (the image ones are in data/image_transforms.h).
//          They run on DataLoader worker threads, so they are plain loops (Note [Data code does
//          not use the thread pool] in data/plain_copy.h).
#include <functional>
#include <variant>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg::data {

// Any callable from tensor to tensor; the classes below are the common ones.
using Transform = std::function<Tensor(const Tensor&)>;
// A transform that draws random numbers, all from the generator it is given: the example's own
// (Note [Per-example random draws] in data/dataset.h). RandomResizedCrop, RandomHorizontalFlip.
using RandomTransform = std::function<Tensor(const Tensor&, Generator&)>;

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

// Applies the transforms in order; random ones draw from the generator in that order:
//   Compose({RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)})
class Compose {
public:
  using Step = std::variant<Transform, RandomTransform>;
  explicit Compose(std::vector<Step> steps) : steps_(std::move(steps)) {}
  Tensor operator()(const Tensor& image, Generator& generator) const;
  // Only for a Compose without random steps (throws naming the first random one otherwise).
  Tensor operator()(const Tensor& image) const;

private:
  std::vector<Step> steps_;
};

}  // namespace sg::data
