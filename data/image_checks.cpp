#include "data/image_checks.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace sg::data {

namespace {

// The little-endian field of `size` bytes at `at`; bytes past the end read as 0, as stb_image
// reads them.
uint64_t little_endian(std::span<const uint8_t> bytes, size_t at, size_t size) {
  uint64_t value = 0;
  for (size_t i = size; i-- > 0;) value = value << 8 | (at + i < bytes.size() ? bytes[at + i] : 0);
  return value;
}

}  // namespace

void check_pixel_limit(const std::string& name, int64_t width, int64_t height, int64_t max_pixels) {
  SG_CHECK(width * height <= max_pixels, "read_image: '", name, "' claims ", width, " x ", height,
           " pixels, more than the ", max_pixels, " an image may have (a corrupt file or a decompression bomb)");
}

// stb_image allocates an IDAT chunk's claimed length before it reads it (up to 1 GiB for a
// 70-byte file), so the chunk lengths are checked against the bytes first. And it copies an empty
// first IDAT chunk into its image data before allocating any: memcpy from a null pointer, which is
// undefined behaviour even for 0 bytes (the image fuzz target found it), so such a file is refused.
void check_png_chunk_lengths(std::span<const uint8_t> bytes, const std::string& name) {
  constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() < 8 || !std::equal(kSignature, kSignature + 8, bytes.begin())) return;
  bool seen_idat = false;
  for (size_t at = 8; at + 8 <= bytes.size();) {
    const uint64_t length = uint64_t{bytes[at]} << 24 | uint64_t{bytes[at + 1]} << 16 | uint64_t{bytes[at + 2]} << 8 |
                            uint64_t{bytes[at + 3]};
    const std::string type(reinterpret_cast<const char*>(bytes.data()) + at + 4, 4);
    const uint64_t left = bytes.size() >= at + 12 ? bytes.size() - at - 12 : 0;  // after length, type and CRC
    SG_CHECK(length <= left && bytes.size() >= at + 12, "read_image: '", name, "' is a truncated or corrupt PNG: its ",
             type, " chunk at byte ", at, " claims ", length, " bytes, but ", left, " remain");
    SG_CHECK(seen_idat || type != "IDAT" || length > 0, "read_image: '", name,
             "' is a PNG whose first IDAT chunk is empty (at byte ", at, "), which stb_image does not decode safely");
    seen_idat = seen_idat || type == "IDAT";
    if (type == "IEND") return;
    at += 12 + length;
  }
}

// stb_image reads past the end of its input as zeros, so a BMP cut short decoded as if whole,
// the missing pixels black (a 54-byte file whose header claims 300 x 200 pixels came out a black
// image); PIL refuses such a file as truncated. The rows of an uncompressed BMP (stb refuses the
// compressed kinds) are stored whole, each padded to 4 bytes, from the byte offset the file
// header gives, which is where stb reads them once it has read the palette. stb sizes the palette
// (of an image under 16 bits a pixel) from the gap between the headers and that offset, counting
// 24 bytes of header, not 12, for the OS/2 header; a gap below zero makes a negative palette size
// that stb does not refuse: it reads no palette, its pixels index an uninitialised one, and it
// reads them from the wrong place. Such files are refused too.
void check_bmp_pixel_data(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 2 || bytes[0] != 'B' || bytes[1] != 'M') return;
  const uint64_t offset = little_endian(bytes, 10, 4), header = little_endian(bytes, 14, 4);
  const bool os2 = header == 12;  // 16-bit sizes and no compression field
  if (!os2 && header != 40 && header != 56 && header != 108 && header != 124) return;  // stb refuses the file
  const uint64_t width = little_endian(bytes, 18, os2 ? 2 : 4);
  // The height is signed: negative for rows stored top-down.
  const uint64_t height =
      os2 ? little_endian(bytes, 20, 2) : std::abs(int64_t{static_cast<int32_t>(little_endian(bytes, 22, 4))});
  const uint64_t bits = little_endian(bytes, os2 ? 24 : 28, 2);
  const uint64_t compression = os2 ? 0 : little_endian(bytes, 30, 4);
  // stb refuses compressed BMPs (1, 2: RLE; 4, 5: JPEG, PNG; 3 is uncompressed with bit masks) and
  // sizes over 2^24, which keeps the sums below far from overflowing.
  if ((compression != 0 && compression != 3) || width > (1 << 24) || height > (1 << 24)) return;
  const int64_t palette_gap = static_cast<int64_t>(offset) - 14 - static_cast<int64_t>(os2 ? 24 : header);
  SG_CHECK(bits >= 16 || palette_gap >= 0, "read_image: '", name, "' is a BMP that stb_image misreads: its ", bits,
           "-bit pixels at byte ", offset, " begin before the end of its headers and palette as stb_image reads them");
  const uint64_t end = offset + height * ((width * bits + 31) / 32 * 4);
  SG_CHECK(end <= bytes.size(), "read_image: '", name, "' is a truncated BMP: its header puts ", width, " x ", height,
           " pixels of ", bits, " bits at bytes ", offset, " to ", end, ", but the file has ", bytes.size(), " bytes");
}

// stb_image decodes the first image of a GIF and, when the file ends inside it, returns the pixels
// it has read with the rest filled in, where PIL refuses the file as truncated. So the blocks are
// walked up to the end of the first image's data: the header and logical screen descriptor (with
// the global colour table its flags announce), then extensions (a label, then sub-blocks, each a
// length byte and that many bytes, up to a 0 length) until the first image: its descriptor, local
// colour table, LZW code size and data sub-blocks. A file that ends anywhere before that last 0 is
// truncated. A trailer or an unknown block before any image is left to stb, which refuses both.
void check_gif_first_frame(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 6 || !std::equal(bytes.begin(), bytes.begin() + 3, "GIF")) return;
  const auto colour_table = [](uint8_t flags) -> size_t { return flags & 0x80 ? 3u << ((flags & 7) + 1) : 0; };
  const auto truncated = [&](size_t needed, const char* part) {
    SG_CHECK(needed <= bytes.size(), "read_image: '", name, "' is a truncated GIF: it ends at byte ", bytes.size(),
             ", inside ", part, " (which needs ", needed, " bytes)");
  };
  // Skips the sub-blocks starting at `at`; returns the offset after their 0 terminator.
  const auto skip_sub_blocks = [&](size_t at, const char* part) {
    for (;;) {
      truncated(at + 1, part);
      const size_t length = bytes[at];
      at += 1 + length;
      if (length == 0) return at;
    }
  };
  truncated(13, "its logical screen descriptor");
  size_t at = 13 + colour_table(bytes[10]);
  for (;;) {
    truncated(at + 1, "its blocks before the first image");
    if (bytes[at] == 0x21) {  // extension: label, sub-blocks
      at = skip_sub_blocks(at + 2, "an extension block before the first image");
    } else if (bytes[at] == 0x2c) {  // image descriptor: position, size, flags; then colours and LZW data
      truncated(at + 10, "the first image's descriptor");
      at += 10 + colour_table(bytes[at + 9]);
      truncated(at + 1, "the first image's colour table");
      skip_sub_blocks(at + 1, "the first image's data");
      return;
    } else {
      return;
    }
  }
}

}  // namespace sg::data
