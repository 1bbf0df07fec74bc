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
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
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

// A PNG whose chunks claim more bytes than the file holds: stb_image allocates an IDAT chunk's
// claimed length before it reads it (up to 1 GiB for a 70-byte file), so the chunk lengths are
// checked against the bytes first (Note [Image size before decoding]).
void check_png_chunk_lengths(std::span<const uint8_t> bytes, const std::string& name) {
  constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() < 8 || !std::equal(kSignature, kSignature + 8, bytes.begin())) return;
  for (size_t at = 8; at + 8 <= bytes.size();) {
    const uint64_t length = uint64_t{bytes[at]} << 24 | uint64_t{bytes[at + 1]} << 16 | uint64_t{bytes[at + 2]} << 8 |
                            uint64_t{bytes[at + 3]};
    const std::string type(reinterpret_cast<const char*>(bytes.data()) + at + 4, 4);
    const uint64_t left = bytes.size() >= at + 12 ? bytes.size() - at - 12 : 0;  // after length, type and CRC
    SG_CHECK(length <= left && bytes.size() >= at + 12, "read_image: '", name, "' is a truncated or corrupt PNG: its ",
             type, " chunk at byte ", at, " claims ", length, " bytes, but ", left, " remain");
    if (type == "IEND") return;
    at += 12 + length;
  }
}

// stb_image (Debian's 2022 version) writes past its 257-entry table of code sizes when the 16
// counts of a JPEG Huffman table (DHT) add up to more than 256: a heap overflow inside its
// decoder's state that the image fuzz target found (stbi__build_huffman). A table has at most 256
// codes, so such a file is corrupt; every DHT segment is checked before stb sees the file, read
// as stb reads it, those between the scans of a progressive JPEG included (the walk skips
// entropy-coded bytes).
void check_jpeg_huffman_tables(std::span<const uint8_t> bytes, const std::string& name) {
  // stb finds its start-of-image marker after any number of 0xFF fill bytes.
  size_t start = 0;
  while (start < bytes.size() && bytes[start] == 0xFF) ++start;
  if (start == 0 || start == bytes.size() || bytes[start] != 0xD8) return;
  for (size_t at = start + 1; at + 4 <= bytes.size();) {
    const uint8_t marker = bytes[at + 1];
    // Entropy-coded data, fill bytes, a stuffed zero, restart markers: no segment starts here.
    if (bytes[at] != 0xFF || marker == 0xFF || marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      ++at;
      continue;
    }
    if (marker == 0xD9) return;                                        // end of image
    const size_t length = size_t{bytes[at + 2]} << 8 | bytes[at + 3];  // counts its own two bytes
    if (marker != 0xC4) {
      at += 2 + length;
      continue;
    }
    // A DHT segment, read as stb reads it: tables (class and id, 16 counts of codes by length,
    // the symbols) while the length says more follow, a byte past the end reading as 0; stb then
    // goes on from where its tables ended, whatever the length said.
    at += 4;
    for (int64_t left = static_cast<int64_t>(length) - 2; left > 0;) {
      size_t codes = 0;
      for (size_t i = 1; i <= 16; ++i) codes += at + i < bytes.size() ? bytes[at + i] : 0;
      SG_CHECK(codes <= 256, "read_image: '", name, "' is a corrupt JPEG: the Huffman table at byte ", at, " declares ",
               codes, " codes, more than the 256 a table can hold");
      at += 17 + codes;
      left -= static_cast<int64_t>(17 + codes);
    }
  }
}

// Note [Image size before decoding]
// stb_image allocates the whole image from the sizes in its header before it reads a pixel, so
// a 78-byte BMP that claims 3 x 8 million pixels made it ask for 100 MB, and a few more bytes ask
// for gigabytes; a PNG's chunk lengths are believed the same way (the image fuzz target found
// both: docs/testing.md). So a PNG's chunk lengths are checked against the file's first, then the
// header is read (stbi_info, which allocates nothing), and an image over the pixel limit is an
// error naming the file and its size. The limit is PIL's: it refuses images over 2 x MAX_IMAGE_PIXELS as
// decompression bombs.
Tensor decode_image(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels) {
  SG_CHECK(!bytes.empty(), "read_image: '", name, "' is empty (0 bytes), not an image");
  SG_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX), "read_image: '", name, "' has ", bytes.size(),
           " bytes, more than stb_image reads (2 GiB)");
  check_png_chunk_lengths(bytes, name);
  check_jpeg_huffman_tables(bytes, name);
  int width = 0, height = 0, channels_in_file = 0;
  if (stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels_in_file)) {
    // A BMP stored top-down has a negative height in its header, and stbi_info passes it on.
    const int64_t pixels = std::abs(int64_t{width}) * std::abs(int64_t{height});
    SG_CHECK(pixels <= max_pixels, "read_image: '", name, "' claims ", std::abs(int64_t{width}), " x ",
             std::abs(int64_t{height}), " pixels, more than the ", max_pixels,
             " an image may have (a corrupt file or a decompression bomb)");
  }
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
