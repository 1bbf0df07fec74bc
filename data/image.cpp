#include "data/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "data/image_checks.h"
#include "data/jpeg_decoder.h"
#include "data/plain_copy.h"

// Note [Decoding in worker threads]
// Images are decoded in DataLoader worker threads, several at once. stb_image keeps two kinds of
// global state: option flags (flip vertically, unpremultiply, iPhone PNG conversion) and the
// reason for the last failure. We never set a flag, so every decode reads the defaults and no
// thread changes them under another. The failure reason is thread-local in Debian's libstb (it is
// built with STBI_THREAD_LOCAL, which stb defines for every C11 / C++11 compiler), so
// stbi_failure_reason() called right after a failed decode on the same thread returns that
// decode's reason, not another thread's. stb_image_write's globals (PNG compression level and
// filter) are only read. Everything else a decode touches is its own: the bytes are read by us
// into a buffer per call, and stb allocates a fresh pixel buffer that the tensor then owns.
// libjpeg has no global state: each JPEG decode has its own decompressor and error manager.

namespace sg::data {

namespace {

constexpr int kRgb = 3;

// strerror(errno) through strerror_r: plain strerror may share one buffer between threads.
std::string errno_message() { return std::error_code(errno, std::generic_category()).message(); }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::error_code ignored;  // a path that cannot be examined fails at the open below, with its reason
  SG_CHECK(!std::filesystem::is_directory(path, ignored), "read_image: '", path, "' is a directory, not an image file");
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  SG_CHECK(file.is_open(), "read_image: cannot open '", path, "': ", errno_message());
  const std::streamoff size = file.tellg();
  SG_CHECK(size >= 0, "read_image: cannot tell the size of '", path, "'");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  file.seekg(0);
  file.read(reinterpret_cast<char*>(bytes.data()), size);
  SG_CHECK(file.gcount() == size, "read_image: cannot read '", path, "': ", errno_message());
  return bytes;
}

// The image's sizes and a contiguous copy of its pixels, after checking what the writers accept.
struct Pixels {
  int height = 0, width = 0, channels = 0;
  Tensor data;
};

Pixels checked_pixels(const char* op, const std::string& path, const Tensor& image) {
  check_hwc_image(image, detail::concat(op, ": '", path, "'"));
  const int64_t channels = image.size(2);
  SG_CHECK(channels >= 1 && channels <= 4, op, ": '", path,
           "': expected 1 to 4 channels (grey, grey + alpha, "
           "RGB, RGBA), got ",
           shape_str(image.sizes()));
  SG_CHECK(image.size(0) > 0 && image.size(1) > 0 && image.size(0) < (1 << 24) && image.size(1) < (1 << 24), op, ": '",
           path, "': cannot write an image of shape ", shape_str(image.sizes()));
  return {static_cast<int>(image.size(0)), static_cast<int>(image.size(1)), static_cast<int>(channels),
          contiguous_plain(image)};
}

// The formats stb_image decodes for us, by their signatures (Note [Which decoder sees a file]).
bool has_stb_signature(std::span<const uint8_t> bytes) {
  const auto begins_with = [&](std::string_view signature) {
    return bytes.size() >= signature.size() &&
           std::equal(signature.begin(), signature.end(), bytes.begin(),
                      [](char expected, uint8_t byte) { return static_cast<uint8_t>(expected) == byte; });
  };
  return begins_with("\x89PNG\r\n\x1a\n") || begins_with("BM") || begins_with("GIF8");
}

// stb_image_write's output callback: appends to a byte vector.
void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  const auto* bytes = static_cast<const uint8_t*>(data);
  out->insert(out->end(), bytes, bytes + size);
}

void write_bytes(const char* op, const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  SG_CHECK(file.is_open(), op, ": cannot create '", path, "': ", errno_message());
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  SG_CHECK(!file.fail(), op, ": cannot write '", path, "': ", errno_message());
}

}  // namespace

// Note [Image size before decoding]
// stb_image allocates the whole image from the sizes in its header before it reads a pixel, so
// a 78-byte BMP that claims 3 x 8 million pixels made it ask for 100 MB, and a few more bytes ask
// for gigabytes; a PNG's chunk lengths are believed the same way (the image fuzz target found
// both: docs/testing.md). So a PNG's chunk lengths are checked against the file's first, then the
// header is read (stbi_info, which allocates nothing), and an image over the pixel limit is an
// error naming the file and its size; a JPEG's header is read by libjpeg and checked the same way
// before its pixels are allocated. The limit is PIL's: it refuses images over 2 x MAX_IMAGE_PIXELS
// as decompression bombs. stb_image also reads past the end of a file as zeros, so a BMP's pixel
// rows are checked to lie within the file, and a GIF's first image to end before it does
// (data/image_checks.cpp).
//
// Note [Which decoder sees a file]
// JPEGs are decoded by libjpeg-turbo, as PIL decodes them (data/jpeg_decoder.cpp): stb_image's
// JPEG decoder is not robust against crafted files (the image fuzz target found out-of-bounds
// reads and writes in it: docs/testing.md). stb_image decodes PNG, BMP and GIF, but it tries its
// decoders in turn on whatever it is given, JPEG, PSD, TGA, HDR and others among them (a JPEG
// with 0xFF fill bytes before its first marker, which libjpeg refuses, would reach stb's JPEG
// decoder). So a file reaches stb only when it begins with the signature of a PNG, a BMP or a
// GIF: none of stb's other decoders accepts those first bytes (its TGA test, which has no
// signature to look for, refuses their second byte).
Tensor decode_image(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels) {
  SG_CHECK(!bytes.empty(), "read_image: '", name, "' is empty (0 bytes), not an image");
  if (is_jpeg(bytes)) return decode_jpeg(bytes, name, max_pixels);
  SG_CHECK(has_stb_signature(bytes), "read_image: cannot decode '", name,
           "': not a JPEG, PNG, BMP or GIF file (it begins with none of their signatures)");
  SG_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX), "read_image: '", name, "' has ", bytes.size(),
           " bytes, more than stb_image reads (2 GiB)");
  check_png_chunk_lengths(bytes, name);
  int width = 0, height = 0, channels_in_file = 0;
  if (stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels_in_file)) {
    // A BMP stored top-down has a negative height in its header, and stbi_info passes it on.
    check_pixel_limit(name, std::abs(int64_t{width}), std::abs(int64_t{height}), max_pixels);
  }
  check_bmp_pixel_data(bytes, name);
  check_gif_first_frame(bytes, name);
  // Asking for 3 channels makes stb convert as PIL's convert("RGB") does (Note at the top of image.h).
  stbi_uc* pixels =
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels_in_file, kRgb);
  // Thread-local: Note [Decoding in worker threads].
  SG_CHECK(pixels != nullptr, "read_image: cannot decode '", name, "': stb_image says '", stbi_failure_reason(),
           "' (a truncated, corrupt or unsupported file)");
  return from_blob(pixels, {height, width, kRgb}, DType::u8, [](void* data) { stbi_image_free(data); });
}

Tensor read_image(const std::string& path) { return decode_image(read_bytes(path), path); }

void write_png(const std::string& path, const Tensor& image) {
  const Pixels p = checked_pixels("write_png", path, image);
  std::vector<uint8_t> bytes;
  const int ok = stbi_write_png_to_func(append_bytes, &bytes, p.width, p.height, p.channels, p.data.raw_data(),
                                        p.width * p.channels);
  SG_CHECK(ok != 0, "write_png: stb_image_write could not encode '", path, "'");
  write_bytes("write_png", path, bytes);
}

void write_jpeg(const std::string& path, const Tensor& image, int quality) {
  SG_CHECK(quality >= 1 && quality <= 100, "write_jpeg: '", path, "': quality must be in [1, 100], got ", quality);
  const Pixels p = checked_pixels("write_jpeg", path, image);
  std::vector<uint8_t> bytes;
  const int ok =
      stbi_write_jpg_to_func(append_bytes, &bytes, p.width, p.height, p.channels, p.data.raw_data(), quality);
  SG_CHECK(ok != 0, "write_jpeg: stb_image_write could not encode '", path, "'");
  write_bytes("write_jpeg", path, bytes);
}

void check_hwc_image(const Tensor& image, const std::string& context) {
  SG_CHECK(image.defined() && image.device().is_cpu() && image.dtype() == DType::u8 && image.dim() == 3, context,
           ": expected a u8 [H, W, C] image on the CPU (decoded pixels, before ToTensor), got ",
           image.defined() ? shape_str(image.sizes()) : "an undefined tensor",
           image.defined() ? detail::concat(" ", image.dtype()) : "");
}

bool has_image_extension(const std::string& path) {
  static constexpr std::array<const char*, 5> kExtensions = {".jpg", ".jpeg", ".png", ".bmp", ".gif"};
  const size_t dot = path.find_last_of("./");
  if (dot == std::string::npos || path[dot] != '.') return false;
  std::string extension = path.substr(dot);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(kExtensions.begin(), kExtensions.end(), extension) != kExtensions.end();
}

}  // namespace sg::data
