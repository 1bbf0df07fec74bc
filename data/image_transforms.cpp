#include "data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/factory.h"
#include "core/philox.h"
#include "data/image.h"  // check_hwc_image: Note [Geometry runs on u8 pixels before ToTensor]
#include "data/plain_copy.h"
#include "data/resample.h"

namespace sg::data {

namespace {

// One uniform in [0, 1) from the example's generator (one Philox block per draw).
double next_uniform(Generator& generator) { return math::uniform01(0, generator.philox(generator.reserve(1))); }

// Python's round(): to the nearest integer, halves to even (the default rounding mode's nearbyint).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

std::array<int64_t, 2> checked_size(std::array<int64_t, 2> size, const char* op) {
  SG_CHECK(size[0] > 0 && size[1] > 0, op, ": the output size must be positive, got ", size[0], " x ", size[1]);
  return size;
}

}  // namespace

Tensor crop(const Tensor& image, const CropBox& box) {
  check_hwc_image(image, "crop");
  SG_CHECK(box.height > 0 && box.width > 0, "crop: the box must be non-empty, got ", box.height, " x ", box.width);
  const Tensor pixels = contiguous_plain(image);
  const int64_t height = image.size(0), width = image.size(1), channels = image.size(2);
  Tensor out = empty({box.height, box.width, channels}, {DType::u8, Device::cpu()});
  const uint8_t* in = pixels.data_ptr<uint8_t>();
  uint8_t* result = out.data_ptr<uint8_t>();
  // The columns of the box inside the image; the rest of each row stays 0.
  const int64_t first_column = std::clamp(box.left, int64_t{0}, width);
  const int64_t end_column = std::clamp(box.left + box.width, int64_t{0}, width);
  const int64_t row_bytes = box.width * channels;
  for (int64_t r = 0; r < box.height; ++r) {
    uint8_t* destination = result + r * row_bytes;
    const int64_t source_row = box.top + r;
    if (source_row < 0 || source_row >= height || first_column >= end_column) {
      std::memset(destination, 0, static_cast<size_t>(row_bytes));
      continue;
    }
    const int64_t before = (first_column - box.left) * channels;
    const int64_t inside = (end_column - first_column) * channels;
    std::memset(destination, 0, static_cast<size_t>(before));
    std::memcpy(destination + before, in + (source_row * width + first_column) * channels, static_cast<size_t>(inside));
    std::memset(destination + before + inside, 0, static_cast<size_t>(row_bytes - before - inside));
  }
  return out;
}

CropBox random_resized_crop_box(int64_t height, int64_t width, std::array<double, 2> scale, std::array<double, 2> ratio,
                                const std::function<double()>& uniform) {
  SG_CHECK(height > 0 && width > 0, "RandomResizedCrop: cannot crop an empty image (", height, " x ", width, ")");
  const auto area = static_cast<double>(height * width);
  // torchvision takes the logs of the ratios as a float32 tensor.
  const double log_ratio_low = std::log(static_cast<float>(ratio[0]));
  const double log_ratio_high = std::log(static_cast<float>(ratio[1]));
  for (int attempt = 0; attempt < 10; ++attempt) {  // torchvision's get_params: 10 tries
    const double target_area = area * (scale[0] + uniform() * (scale[1] - scale[0]));
    const double aspect_ratio = std::exp(log_ratio_low + uniform() * (log_ratio_high - log_ratio_low));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect_ratio));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect_ratio));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const auto top = static_cast<int64_t>(uniform() * static_cast<double>(height - h + 1));
      const auto left = static_cast<int64_t>(uniform() * static_cast<double>(width - w + 1));
      return {top, left, h, w};
    }
  }
  // No try fitted: the centred crop of the whole image, clamped to the ratio range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio[0]) h = round_half_even(static_cast<double>(w) / ratio[0]);
  else if (in_ratio > ratio[1]) w = round_half_even(static_cast<double>(h) * ratio[1]);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

RandomResizedCrop::RandomResizedCrop(int64_t size, std::array<double, 2> scale, std::array<double, 2> ratio)
    : RandomResizedCrop(std::array<int64_t, 2>{size, size}, scale, ratio) {}

RandomResizedCrop::RandomResizedCrop(std::array<int64_t, 2> size, std::array<double, 2> scale,
                                     std::array<double, 2> ratio)
    : size_(checked_size(size, "RandomResizedCrop")),
      scale_(scale),
      ratio_(ratio) {
  SG_CHECK(0.0 < scale_[0] && scale_[0] <= scale_[1],
           "RandomResizedCrop: scale must be (min, max) with "
           "0 < min <= max, got (",
           scale_[0], ", ", scale_[1], ")");
  SG_CHECK(0.0 < ratio_[0] && ratio_[0] <= ratio_[1],
           "RandomResizedCrop: ratio must be (min, max) with "
           "0 < min <= max, got (",
           ratio_[0], ", ", ratio_[1], ")");
}

Tensor RandomResizedCrop::operator()(const Tensor& image, Generator& generator) const {
  check_hwc_image(image, "RandomResizedCrop");
  const CropBox box = random_resized_crop_box(image.size(0), image.size(1), scale_, ratio_,
                                              [&generator] { return next_uniform(generator); });
  return resize_bilinear(crop(image, box), size_[0], size_[1]);
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  SG_CHECK(p_ >= 0.0 && p_ <= 1.0, "RandomHorizontalFlip: p must be a probability in [0, 1], got ", p_);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& image, Generator& generator) const {
  check_hwc_image(image, "RandomHorizontalFlip");
  // Drawn even when p is 0 or 1, so the draws of the transforms after it do not depend on p.
  if (!(next_uniform(generator) < p_)) return image;
  const Tensor pixels = contiguous_plain(image);
  const int64_t height = image.size(0), width = image.size(1), channels = image.size(2);
  Tensor out = empty(image.sizes(), {DType::u8, Device::cpu()});
  const uint8_t* in = pixels.data_ptr<uint8_t>();
  uint8_t* result = out.data_ptr<uint8_t>();
  for (int64_t r = 0; r < height; ++r)
    for (int64_t c = 0; c < width; ++c)
      std::memcpy(result + (r * width + c) * channels, in + (r * width + (width - 1 - c)) * channels,
                  static_cast<size_t>(channels));
  return out;
}

Resize::Resize(int64_t size) : size_({size, -1}) {
  SG_CHECK(size > 0, "Resize: the size must be positive, got ", size);
}

Resize::Resize(std::array<int64_t, 2> size) : size_(checked_size(size, "Resize")) {}

Tensor Resize::operator()(const Tensor& image) const {
  check_hwc_image(image, "Resize");
  const int64_t height = image.size(0), width = image.size(1);
  if (size_[1] > 0) return resize_bilinear(image, size_[0], size_[1]);
  // torchvision: the shorter side becomes size, the longer int(size * long / short).
  const int64_t short_side = std::min(height, width), long_side = std::max(height, width);
  const auto long_target =
      static_cast<int64_t>(static_cast<double>(size_[0] * long_side) / static_cast<double>(short_side));
  return width <= height ? resize_bilinear(image, long_target, size_[0])
                         : resize_bilinear(image, size_[0], long_target);
}

CenterCrop::CenterCrop(int64_t size) : CenterCrop(std::array<int64_t, 2>{size, size}) {}

CenterCrop::CenterCrop(std::array<int64_t, 2> size) : size_(checked_size(size, "CenterCrop")) {}

Tensor CenterCrop::operator()(const Tensor& image) const {
  check_hwc_image(image, "CenterCrop");
  // torchvision pads a dim the crop exceeds by (crop - size) // 2 before and the rest after, then
  // crops at round((size - crop) / 2): in the image's own coordinates, these offsets.
  const auto offset = [](int64_t size, int64_t crop_size) {
    return crop_size > size ? -((crop_size - size) / 2) : round_half_even(static_cast<double>(size - crop_size) / 2.0);
  };
  return crop(image, {offset(image.size(0), size_[0]), offset(image.size(1), size_[1]), size_[0], size_[1]});
}

Tensor ToTensor::operator()(const Tensor& image) const {
  check_hwc_image(image, "ToTensor");
  const Tensor pixels = contiguous_plain(image);
  const int64_t height = image.size(0), width = image.size(1), channels = image.size(2);
  Tensor out = empty({channels, height, width}, {DType::f32, Device::cpu()});
  const uint8_t* in = pixels.data_ptr<uint8_t>();
  float* result = out.data_ptr<float>();
  const int64_t plane = height * width;
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < channels; ++c) result[c * plane + p] = static_cast<float>(in[p * channels + c]) / 255.0f;
  return out;
}

}  // namespace sg::data
