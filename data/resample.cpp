#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "data/image.h"
#include "data/plain_copy.h"

namespace sg::data {

namespace {

// Output pixel i of one pass reads inputs first[i] .. first[i] + count[i] - 1 with the integer
// weights weights[i * max_taps + j], each the real weight times 2^precision.
struct Taps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<int32_t> weights;
  int64_t max_taps = 0;
  int precision = 0;
};

// The steps and their double / integer conversions follow torch's _compute_index_ranges_weights
// and _compute_index_ranges_int16_weights (Note [Resampling as torch does on uint8 images]).
Taps antialiased_taps(int64_t input_size, int64_t output_size) {
  const double scale = static_cast<double>(input_size) / static_cast<double>(output_size);
  const double support = scale >= 1.0 ? scale : 1.0;
  const double inverse_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  Taps taps;
  taps.max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  taps.first.resize(static_cast<size_t>(output_size));
  taps.count.resize(static_cast<size_t>(output_size));
  std::vector<double> weights(static_cast<size_t>(output_size * taps.max_taps), 0.0);
  double largest = 0.0;
  for (int64_t i = 0; i < output_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t first = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    const int64_t count = std::clamp(std::min(static_cast<int64_t>(center + support + 0.5), input_size) - first,
                                     int64_t{0}, taps.max_taps);
    double* w = &weights[static_cast<size_t>(i * taps.max_taps)];
    double total = 0.0;
    for (int64_t j = 0; j < count; ++j) {
      const double distance = std::abs((static_cast<double>(j + first) - center + 0.5) * inverse_scale);
      w[j] = distance < 1.0 ? 1.0 - distance : 0.0;  // the triangle (bilinear) filter
      total += w[j];
    }
    if (total != 0.0)
      for (int64_t j = 0; j < count; ++j) {
        w[j] /= total;
        largest = std::max(largest, w[j]);
      }
    taps.first[static_cast<size_t>(i)] = first;
    taps.count[static_cast<size_t>(i)] = count;
  }
  // The most fraction bits that keep the largest weight below 2^15 (it is stored as int16).
  for (taps.precision = 0; taps.precision < 22; ++taps.precision)
    if (static_cast<int>(0.5 + largest * (1 << (taps.precision + 1))) >= (1 << 15)) break;
  taps.weights.resize(weights.size());
  for (size_t k = 0; k < weights.size(); ++k)
    taps.weights[k] = static_cast<int32_t>(0.5 + weights[k] * (1 << taps.precision));  // weights are >= 0
  return taps;
}

// One pass along a dim: `lines` consecutive lines, each `input_size` (or `output_size`) positions of
// `step` bytes; the `step` bytes at one position (a pixel's channels, or a whole row) are resampled
// together.
void resample_pass(const uint8_t* input, uint8_t* output, const Taps& taps, int64_t lines, int64_t input_size,
                   int64_t output_size, int64_t step) {
  const int32_t half = int32_t{1} << (taps.precision - 1);
  std::vector<int32_t> sums(static_cast<size_t>(step));
  for (int64_t line = 0; line < lines; ++line) {
    const uint8_t* source = input + line * input_size * step;
    uint8_t* destination = output + line * output_size * step;
    for (int64_t i = 0; i < output_size; ++i) {
      const int32_t* weights = &taps.weights[static_cast<size_t>(i * taps.max_taps)];
      const uint8_t* first = source + taps.first[static_cast<size_t>(i)] * step;
      std::fill(sums.begin(), sums.end(), half);
      for (int64_t j = 0; j < taps.count[static_cast<size_t>(i)]; ++j)
        for (int64_t k = 0; k < step; ++k) sums[static_cast<size_t>(k)] += first[j * step + k] * weights[j];
      uint8_t* out = destination + i * step;
      for (int64_t k = 0; k < step; ++k)
        out[k] = static_cast<uint8_t>(std::clamp(sums[static_cast<size_t>(k)] >> taps.precision, 0, 255));
    }
  }
}

}  // namespace

Tensor resize_bilinear(const Tensor& image, int64_t height, int64_t width) {
  check_hwc_image(image, "resize");
  const int64_t in_height = image.size(0), in_width = image.size(1), channels = image.size(2);
  SG_CHECK(height > 0 && width > 0 && in_height > 0 && in_width > 0, "resize: cannot resize an image of shape ",
           shape_str(image.sizes()), " to ", height, " x ", width);
  Tensor current = contiguous_plain(image);
  if (width != in_width) {  // along the width first, as torch does: each row is a line
    Tensor next = empty({in_height, width, channels}, {DType::u8, Device::cpu()});
    resample_pass(current.data_ptr<uint8_t>(), next.data_ptr<uint8_t>(), antialiased_taps(in_width, width), in_height,
                  in_width, width, channels);
    current = next;
  }
  if (height != in_height) {  // then along the height: one line whose positions are whole rows
    Tensor next = empty({height, width, channels}, {DType::u8, Device::cpu()});
    resample_pass(current.data_ptr<uint8_t>(), next.data_ptr<uint8_t>(), antialiased_taps(in_height, height), 1,
                  in_height, height, width * channels);
    current = next;
  }
  return current;
}

}  // namespace sg::data
