#pragma once
// defines: read_image, decode_image, write_png, write_jpeg, check_hwc_image, has_image_extension —
//          image files to and from u8 [H, W, C] tensors (libjpeg-turbo decodes JPEG, stb_image
//          PNG, BMP and GIF; stb_image_write writes).
//
// Decoded images are always RGB, u8 [H, W, 3] (height, width, channel; the layout files and PIL
// use), whatever the file holds, as PIL's Image.convert("RGB"): grey and grey + alpha are
// repeated into the three channels, alpha is dropped (not composited), CMYK JPEGs are converted
// as PIL converts them. Formats: JPEG (baseline and progressive; grey, YCbCr, RGB, CMYK, YCCK),
// PNG (8 and 16 bits; 16 bits keep the high byte), BMP, GIF (first frame). JPEGs decode to PIL's
// pixels, bit for bit (both use libjpeg-turbo at its default settings); PNG, BMP and GIF exactly.
#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace sg::data {

// Reads and decodes the image file at `path`. Throws an sg::Error naming the file when it cannot
// be read, is empty, or is not an image we decode (truncated, another format, corrupt), with the
// decoder's reason.
Tensor read_image(const std::string& path);

// The most pixels a decoded image may have: 2 x PIL's MAX_IMAGE_PIXELS, where PIL refuses an image
// as a decompression bomb (Note [Image size before decoding]).
constexpr int64_t kMaxImagePixels = int64_t{2} * 89'478'485;

// Decodes an image file's bytes; `name` is what an error calls them (usually the file's path). An
// image whose header announces more than `max_pixels` pixels is refused before it is decoded.
Tensor decode_image(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels = kMaxImagePixels);

// Write a u8 [H, W, C] image, C = 1 (grey), 2 (grey + alpha), 3 (RGB) or 4 (RGBA), to `path`: PNG is lossless,
// JPEG has `quality` in [1, 100] and drops alpha. Any strides; throws an sg::Error naming the
// file when the shape, the dtype or the write is wrong.
void write_png(const std::string& path, const Tensor& image);
void write_jpeg(const std::string& path, const Tensor& image, int quality = 90);

// Throws an sg::Error beginning with `context` unless `image` is a u8 [H, W, C] tensor on the CPU,
// the layout of decoded images that the writers and the geometric transforms take.
void check_hwc_image(const Tensor& image, const std::string& context);

// True when the file name ends in .jpg, .jpeg, .png, .bmp or .gif, in any letter case: the
// files an ImageFolder loads.
bool has_image_extension(const std::string& path);

}  // namespace sg::data
