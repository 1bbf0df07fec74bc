#pragma once
// defines: FashionMNIST — Zalando's 28x28 grey clothing images in 10 classes, read from the
//          IDX files (MNIST's format and file names) into memory.
#include <array>
#include <string>

#include "data/dataset.h"
#include "data/transforms.h"

namespace sg::data {

class FashionMNIST : public Dataset {
public:
  // Where the Debian package dataset-fashion-mnist installs the files.
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  // Mean and standard deviation of the training pixels in [0, 1], for Normalize({kMean}, {kStd}).
  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;
  // Label i names classes()[i] (torchvision's FashionMNIST.classes).
  static const std::array<const char*, 10>& classes();

  // Reads train-images-idx3-ubyte and train-labels-idx1-ubyte (t10k-... when !train) from
  // `root`, each as .gz or raw. Examples are {image f32 [1, 28, 28] in [0, 1], then `transform`
  // if given; label i64 scalar}.
  explicit FashionMNIST(const std::string& root = kDefaultRoot, bool train = true, Transform transform = {});

  int64_t size() const override { return examples_.size(); }
  Example get(int64_t index) const override;

  const Tensor& images() const { return examples_.inputs(); }   // u8 [N, 1, 28, 28]
  const Tensor& labels() const { return examples_.targets(); }  // i64 [N]

private:
  TensorDataset examples_;  // the raw pixels and labels; get() converts one image at a time
  Transform transform_;
};

}  // namespace sg::data
