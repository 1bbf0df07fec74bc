#pragma once
// defines: CropBox, crop, random_resized_crop_box, RandomResizedCrop, RandomHorizontalFlip,
//          Resize, CenterCrop, ToTensor — torchvision.transforms' image transforms, with its
//          defaults, and the numerics of torchvision.transforms.v2 on uint8 images (Note
//          [Resampling as torch does on uint8 images] in data/resample.h).
//
// Note [Geometry runs on u8 pixels before ToTensor]
// The geometric transforms take and return u8 [H, W, C] images, the decoded layout (read_image),
// and ToTensor then makes the f32 [C, H, W] in [0, 1] a model reads — the order of a PIL pipeline
// (RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize). Cropping before converting
// touches 4x fewer bytes (u8, and only the crop), and the resize then runs torch's integer
// uint8 kernel, so a pipeline here equals torchvision.transforms.v2.Compose([...]) applied to the
// uint8 tensor of the same decoded image, pixel for pixel (given the same random parameters), and
// Pillow's resize of a PIL pipeline within one level. A geometric transform given anything else
// (an f32 image after ToTensor) throws, naming the shape and this order.
//
//   data::Compose train({data::RandomResizedCrop(224), data::RandomHorizontalFlip(), data::ToTensor(),
//                        data::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})});
//   data::Compose eval({data::Resize(256), data::CenterCrop(224), data::ToTensor(), data::Normalize(...)});
#include <array>
#include <cstdint>
#include <functional>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg::data {

// A rectangle of an image: rows top .. top + height - 1, columns left .. left + width - 1.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// The pixels of `box` in a u8 [H, W, C] image, as a new image; parts outside the image are 0
// (torchvision's crop pads with zeros).
Tensor crop(const Tensor& image, const CropBox& box);

// RandomResizedCrop.get_params given its uniform draws in [0, 1): up to 10 tries, each drawing the
// area fraction (uniform in `scale`) and the log aspect ratio (uniform in log `ratio`), then, for
// the first box that fits, its top and left (uniform integers, floor(u * choices)); when no try
// fits, the centred crop of the whole image clamped to `ratio`. Rounding as Python's round (half
// to even). Separate from the generator so that tests can replay torchvision's logic.
CropBox random_resized_crop_box(int64_t height, int64_t width, std::array<double, 2> scale, std::array<double, 2> ratio,
                                const std::function<double()>& uniform);

// A random box (random_resized_crop_box) resized to size x size or [height, width] with
// antialiased bilinear resampling.
class RandomResizedCrop {
public:
  explicit RandomResizedCrop(int64_t size, std::array<double, 2> scale = {0.08, 1.0},
                             std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0});
  RandomResizedCrop(std::array<int64_t, 2> size, std::array<double, 2> scale = {0.08, 1.0},
                    std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0});
  Tensor operator()(const Tensor& image, Generator& generator) const;

private:
  std::array<int64_t, 2> size_;
  std::array<double, 2> scale_;
  std::array<double, 2> ratio_;
};

// Mirrors the image left to right with probability p.
class RandomHorizontalFlip {
public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& image, Generator& generator) const;

private:
  double p_;
};

// Resize(size): the shorter side becomes `size`, the longer keeps the aspect ratio (truncated, as
// torchvision's int(size * long / short)); Resize({height, width}): exactly that size.
class Resize {
public:
  explicit Resize(int64_t size);
  explicit Resize(std::array<int64_t, 2> size);
  Tensor operator()(const Tensor& image) const;

private:
  std::array<int64_t, 2> size_;  // {size, -1} for the shorter-side form
};

// The central size x size (or [height, width]) pixels, the offsets rounded half to even as
// torchvision's round((H - h) / 2); a crop larger than the image is padded with zeros.
class CenterCrop {
public:
  explicit CenterCrop(int64_t size);
  explicit CenterCrop(std::array<int64_t, 2> size);
  Tensor operator()(const Tensor& image) const;

private:
  std::array<int64_t, 2> size_;
};

// u8 [H, W, C] to f32 [C, H, W] in [0, 1] (torchvision's ToTensor of a PIL image).
struct ToTensor {
  Tensor operator()(const Tensor& image) const;
};

}  // namespace sg::data
