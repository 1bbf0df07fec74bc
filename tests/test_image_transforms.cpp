// The image transforms against torchvision: every expected value comes from torchvision's own
// transforms (tests/reference/make_transform_constants.py wrote reference/image_transforms_expected.h),
// so resampling, cropping and the RandomResizedCrop box logic match it exactly. u8 results are
// compared exactly: the resampler repeats torch's double and integer steps (Note [Resampling as
// torch does on uint8 images] in data/resample.h), so any difference is a bug, not rounding noise.
#include <cstring>
#include <string>
#include <vector>

#include "helpers.h"
#include "reference/image_transforms_expected.h"

using namespace sg;
namespace reference = sg::test::transform_reference;

namespace {

Tensor reference_image() {
  Tensor image = empty({reference::kHeight, reference::kWidth, 3}, {DType::u8, Device::cpu()});
  std::memcpy(image.raw_data(), reference::kImage.data(), reference::kImage.size());
  return image;
}

std::vector<uint8_t> bytes(const Tensor& image) {
  REQUIRE(image.dtype() == DType::u8);
  std::vector<uint8_t> out;
  for (double v : test::values(image)) out.push_back(static_cast<uint8_t>(v));
  return out;
}

// How many bytes differ, and by at most how much, so a failure says more than "not equal".
std::string difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& expected) {
  if (got.size() != expected.size()) return "sizes differ";
  int count = 0, largest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int d = std::abs(int(got[i]) - int(expected[i]));
    count += d != 0;
    largest = std::max(largest, d);
  }
  return std::to_string(count) + " of " + std::to_string(got.size()) + " bytes differ, by up to " +
         std::to_string(largest);
}

#define CHECK_PIXELS(image, height, width, expected)       \
  do {                                                     \
    CHECK((image).sizes() == Shape{(height), (width), 3}); \
    const std::vector<uint8_t> got_ = bytes(image);        \
    INFO(difference(got_, (expected)));                    \
    CHECK(got_ == (expected));                             \
  } while (0)

}  // namespace

TEST_CASE("Resize to an exact size equals torchvision's antialiased bilinear resize of a uint8 tensor") {
  const Tensor image = reference_image();
  for (const auto& c : reference::kResize) {
    CAPTURE(c.height);
    CAPTURE(c.width);
    CHECK_PIXELS(data::Resize({c.height, c.width})(image), c.height, c.width, c.expected);
  }
}

TEST_CASE("photo-sized resizes, shrinking and enlarging, equal torch's uint8 kernel byte for byte") {
  for (const auto& c : reference::kLargeResize) {
    CAPTURE(c.in_height);
    CAPTURE(c.in_width);
    Tensor image = empty({c.in_height, c.in_width, 3}, {DType::u8, Device::cpu()});
    uint8_t* p = image.data_ptr<uint8_t>();
    for (int64_t r = 0; r < c.in_height; ++r)
      for (int64_t col = 0; col < c.in_width; ++col)
        for (int64_t k = 0; k < 3; ++k)
          p[(r * c.in_width + col) * 3 + k] = static_cast<uint8_t>((r * r * 3 + col * 7 + k * 50 + r * col / 5) % 256);
    const Tensor out = data::resize_bilinear(image, c.height, c.width);
    uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a 64, as the script
    for (int64_t i = 0; i < out.numel(); ++i) hash = (hash ^ out.data_ptr<uint8_t>()[i]) * 0x100000001B3ull;
    CHECK(hash == c.hash);
  }
}

TEST_CASE("Resize of the shorter side keeps the aspect ratio as torchvision truncates it") {
  const Tensor image = reference_image();
  for (const auto& c : reference::kShorterSide) {
    CAPTURE(c.size);
    CHECK_PIXELS(data::Resize(c.size)(image), c.height, c.width, c.expected);
  }
}

TEST_CASE("Resize reads a strided view the same as its contiguous copy") {
  // The image's transpose [W, H, C] viewed through strides, against the same pixels made contiguous.
  const Tensor image = reference_image().transpose(0, 1);
  const Tensor copy = image.contiguous();
  CHECK(bytes(data::Resize({5, 4})(image)) == bytes(data::Resize({5, 4})(copy)));
}

TEST_CASE("crop then resize of a box equals torchvision's resized_crop") {
  const Tensor image = reference_image();
  for (const auto& c : reference::kResizedCrop) {
    CAPTURE(c.top);
    CAPTURE(c.left);
    const Tensor cropped = data::crop(image, {c.top, c.left, c.crop_height, c.crop_width});
    CHECK_PIXELS(data::resize_bilinear(cropped, c.height, c.width), c.height, c.width, c.expected);
  }
}

TEST_CASE("CenterCrop rounds half-pixel offsets to even and pads crops larger than the image with zeros") {
  const Tensor image = reference_image();
  for (const auto& c : reference::kCenterCrop) {
    CAPTURE(c.height);
    CAPTURE(c.width);
    CHECK_PIXELS(data::CenterCrop({c.height, c.width})(image), c.height, c.width, c.expected);
  }
}

TEST_CASE("ToTensor then Normalize equals torchvision's on the same pixels") {
  const Tensor out =
      data::Compose({data::ToTensor(), data::Normalize(reference::kMean, reference::kStd)})(reference_image());
  CHECK(out.sizes() == Shape{3, reference::kHeight, reference::kWidth});
  CHECK(out.dtype() == DType::f32);
  // Both divide by 255 in f32 and normalise in f32 (ours through f32 math too): equal to the last bit
  // but for the order of two roundings, so one f32 ulp at the values' scale (|x| < 2.7).
  test::check_close(out, std::vector<double>(reference::kNormalized.begin(), reference::kNormalized.end()), 5e-7);
}

TEST_CASE("random_resized_crop_box gives torchvision's get_params box for the same draws, fallback included") {
  for (const auto& c : reference::kCropBoxes) {
    size_t next = 0;
    const auto uniform = [&] {
      REQUIRE(next < c.draws.size());
      return c.draws[next++];
    };
    CAPTURE(c.height);
    CAPTURE(c.width);
    const data::CropBox box = data::random_resized_crop_box(c.height, c.width, c.scale, c.ratio, uniform);
    CHECK(box == data::CropBox{c.top, c.left, c.crop_height, c.crop_width});
  }
}

TEST_CASE("RandomResizedCrop is a crop of the box its generator's draws give, resized to the size asked") {
  const Tensor image = reference_image();
  const data::RandomResizedCrop transform(7);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Generator generator(seed);
    const Tensor out = transform(image, generator);
    // Replay: the same draws, one Philox block each, into the box logic checked above.
    Generator replay(seed);
    const data::CropBox box =
        data::random_resized_crop_box(image.size(0), image.size(1), {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0},
                                      [&] { return math::uniform01(0, replay.philox(replay.reserve(1))); });
    CHECK(bytes(out) == bytes(data::resize_bilinear(data::crop(image, box), 7, 7)));
    CHECK(generator.offset() == replay.offset());
  }
}

TEST_CASE("RandomHorizontalFlip mirrors columns with probability p, drawing once either way") {
  const Tensor image = reference_image();
  const data::RandomHorizontalFlip flip(0.5);
  int flipped = 0;
  const int trials = 400;
  for (int seed = 0; seed < trials; ++seed) {
    Generator generator(seed);
    const Tensor out = flip(image, generator);
    CHECK(generator.offset() == 1);
    const std::vector<uint8_t> got = bytes(out);
    if (got == reference::kImage) continue;
    ++flipped;
    for (int64_t r = 0; r < image.size(0); ++r)
      for (int64_t c = 0; c < image.size(1); ++c)
        for (int64_t k = 0; k < 3; ++k)
          REQUIRE(got[(r * image.size(1) + c) * 3 + k] ==
                  reference::kImage[(r * image.size(1) + image.size(1) - 1 - c) * 3 + k]);
  }
  // Binomial(400, 0.5): standard deviation 10, so 140..260 is six of them either side.
  CHECK(flipped > 140);
  CHECK(flipped < 260);
  Generator generator(1);
  CHECK(bytes(data::RandomHorizontalFlip(0.0)(image, generator)) == reference::kImage);
  CHECK(bytes(data::RandomHorizontalFlip(1.0)(data::RandomHorizontalFlip(1.0)(image, generator), generator)) ==
        reference::kImage);
}

TEST_CASE("a Compose with random steps draws them in order from the generator it is given") {
  const Tensor image = reference_image();
  const data::Compose pipeline({data::RandomResizedCrop(5), data::RandomHorizontalFlip(), data::ToTensor()});
  Generator first(7), second(7), third(8);
  const Tensor a = pipeline(image, first);
  CHECK(test::max_abs_diff(a, pipeline(image, second)) == 0.0);
  CHECK(a.sizes() == Shape{3, 5, 5});
  CHECK(test::max_abs_diff(a, pipeline(image, third)) > 0.0);
  CHECK_THROWS_WITH_AS(pipeline(image), doctest::Contains("step 0 of 3 draws random numbers"), Error);
}

TEST_CASE("the image transforms name the shape they refuse and the constructors their bad arguments") {
  const Tensor after_to_tensor = data::ToTensor()(reference_image());
  Generator generator;
  CHECK_THROWS_WITH_AS(data::RandomResizedCrop(4)(after_to_tensor, generator),
                       doctest::Contains("RandomResizedCrop: expected a u8 [H, W, C] image on the CPU (decoded "
                                         "pixels, before ToTensor), got [3, 11, 13] f32"),
                       Error);
  CHECK_THROWS_WITH_AS(data::CenterCrop(3)(after_to_tensor), doctest::Contains("CenterCrop: expected a u8"), Error);
  CHECK_THROWS_WITH_AS(data::RandomResizedCrop(4, {0.5, 0.1}), doctest::Contains("scale must be (min, max)"), Error);
  CHECK_THROWS_WITH_AS(data::RandomResizedCrop(4, {0.08, 1.0}, {0.0, 1.0}), doctest::Contains("ratio must be"), Error);
  CHECK_THROWS_WITH_AS(data::RandomHorizontalFlip(1.5), doctest::Contains("p must be a probability"), Error);
  CHECK_THROWS_WITH_AS(data::Resize(0), doctest::Contains("Resize: the size must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(data::crop(reference_image(), {0, 0, 0, 3}), doctest::Contains("non-empty"), Error);
}
