#include "data/transforms.h"

#include "core/factory.h"
#include "data/plain_copy.h"

namespace sg::data {

Tensor ToFloat::operator()(const Tensor& image) const {
  SG_CHECK(image.dtype() == DType::u8, "ToFloat: expected u8 pixels, got ", image.dtype(), " of shape ",
           shape_str(image.sizes()));
  const Tensor pixels = contiguous_plain(image);
  Tensor out = empty(image.sizes(), {DType::f32, Device::cpu()});
  const uint8_t* in = pixels.data_ptr<uint8_t>();
  float* result = out.data_ptr<float>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) result[i] = static_cast<float>(in[i]) / 255.0f;
  return out;
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  SG_CHECK(!mean_.empty() && mean_.size() == std_.size(),
           "Normalize: mean and std need the same, nonzero, "
           "number of channels; got ",
           mean_.size(), " and ", std_.size());
  for (size_t c = 0; c < std_.size(); ++c)
    SG_CHECK(std_[c] != 0.0, "Normalize: std of channel ", c, " is zero, which would divide by zero");
}

Tensor Normalize::operator()(const Tensor& image) const {
  SG_CHECK(image.dim() >= 1, "Normalize: expected a [C, ...] image, got shape ", shape_str(image.sizes()));
  const int64_t channels = image.size(0);
  const auto given = static_cast<int64_t>(mean_.size());
  SG_CHECK(given == 1 || given == channels, "Normalize: ", given, " means and stds for an image of shape ",
           shape_str(image.sizes()), " with ", channels, " channels");
  const Tensor in = contiguous_plain(image);
  Tensor out = empty(image.sizes(), {image.dtype(), Device::cpu()});
  const int64_t per_channel = channels == 0 ? 0 : image.numel() / channels;
  SG_DISPATCH_FLOATING(image.dtype(), "Normalize", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* source = in.data_ptr<scalar_t>();
    scalar_t* result = out.data_ptr<scalar_t>();
    for (int64_t c = 0; c < channels; ++c) {
      const auto channel_mean = static_cast<math_t>(mean_[given == 1 ? 0 : c]);
      const auto channel_std = static_cast<math_t>(std_[given == 1 ? 0 : c]);
      for (int64_t i = c * per_channel; i < (c + 1) * per_channel; ++i)
        result[i] = static_cast<scalar_t>((static_cast<math_t>(source[i]) - channel_mean) / channel_std);
    }
  });
  return out;
}

Tensor Compose::operator()(const Tensor& image, Generator& generator) const {
  Tensor result = image;
  for (const Step& step : steps_) {
    if (const auto* transform = std::get_if<Transform>(&step)) result = (*transform)(result);
    else result = std::get<RandomTransform>(step)(result, generator);
  }
  return result;
}

Tensor Compose::operator()(const Tensor& image) const {
  for (size_t i = 0; i < steps_.size(); ++i)
    SG_CHECK(std::holds_alternative<Transform>(steps_[i]), "Compose: step ", i, " of ", steps_.size(),
             " draws random numbers, so the Compose needs a generator: call it as compose(image, generator) "
             "(a data set's get_augmented passes the example's own, Note [Per-example random draws])");
  Generator unused;
  return (*this)(image, unused);
}

}  // namespace sg::data
