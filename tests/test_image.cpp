// Image files: decoding of the files the tests write (stb_image: PNG, BMP, GIF) and of JPEGs PIL
// wrote (libjpeg-turbo, to PIL's pixels), PIL's convert("RGB") rules for grey, alpha and CMYK,
// every kind of bad file, and decoding from several threads at once.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dist_harness.h"
#include "helpers.h"
#include "reference/jpeg_expected.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

// u8 [H, W, C] of random bytes.
Tensor random_image(int64_t height, int64_t width, int64_t channels) {
  return randint(0, 256, {height, width, channels}, {DType::u8, Device::cpu()}, &test::rng());
}

// A smooth u8 [H, W, 3] image (JPEG keeps smooth images within a few levels).
Tensor gradient_image(int64_t height, int64_t width) {
  Tensor image = empty({height, width, 3}, {DType::u8, Device::cpu()});
  uint8_t* p = image.data_ptr<uint8_t>();
  for (int64_t r = 0; r < height; ++r)
    for (int64_t c = 0; c < width; ++c) {
      p[(r * width + c) * 3 + 0] = static_cast<uint8_t>(4 * r);
      p[(r * width + c) * 3 + 1] = static_cast<uint8_t>(3 * c);
      p[(r * width + c) * 3 + 2] = static_cast<uint8_t>(128 + r - c);
    }
  return image;
}

std::vector<double> channel(const Tensor& image, int64_t c) {
  std::vector<double> all = test::values(image), out;
  for (size_t i = static_cast<size_t>(c); i < all.size(); i += static_cast<size_t>(image.size(2)))
    out.push_back(all[i]);
  return out;
}

void write_text(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// `text`'s bytes, as decode_image takes them.
std::span<const uint8_t> as_bytes(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// The message of the error read_image throws for `path`.
std::string decode_error(const std::string& path) {
  try {
    data::read_image(path);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a PNG written from RGB pixels reads back exactly, from any strides") {
  test::TempDir dir;
  const std::string path = dir.path() + "/rgb.png";
  const Tensor image = random_image(9, 14, 3);
  data::write_png(path, image);
  const Tensor back = data::read_image(path);
  CHECK(back.sizes() == Shape{9, 14, 3});
  CHECK(back.dtype() == DType::u8);
  CHECK(test::values(back) == test::values(image));
  const Tensor transposed = image.transpose(0, 1);  // [14, 9, 3] through strides
  data::write_png(path, transposed);
  CHECK(test::values(data::read_image(path)) == test::values(transposed));
}

TEST_CASE("grey and grey + alpha images decode to RGB with the grey in every channel, alpha dropped") {
  test::TempDir dir;
  for (int64_t channels : {1, 2}) {
    CAPTURE(channels);
    const std::string path = dir.path() + "/grey.png";
    const Tensor image = random_image(7, 5, channels);
    data::write_png(path, image);
    const Tensor back = data::read_image(path);
    CHECK(back.sizes() == Shape{7, 5, 3});
    for (int64_t c = 0; c < 3; ++c) CHECK(channel(back, c) == channel(image, 0));
  }
}

TEST_CASE("an RGBA image decodes to its RGB channels, the alpha dropped rather than composited") {
  test::TempDir dir;
  const std::string path = dir.path() + "/rgba.png";
  const Tensor image = random_image(6, 8, 4);
  data::write_png(path, image);
  const Tensor back = data::read_image(path);
  CHECK(back.sizes() == Shape{6, 8, 3});
  for (int64_t c = 0; c < 3; ++c) CHECK(channel(back, c) == channel(image, c));
}

TEST_CASE("a JPEG written at quality 95 reads back within a few levels of a smooth image") {
  test::TempDir dir;
  const std::string path = dir.path() + "/smooth.jpg";
  const Tensor image = gradient_image(32, 40);
  data::write_jpeg(path, image, 95);
  const Tensor back = data::read_image(path);
  CHECK(back.sizes() == Shape{32, 40, 3});
  const std::vector<double> got = test::values(back), expected = test::values(image);
  double total = 0, largest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    total += std::abs(got[i] - expected[i]);
    largest = std::max(largest, std::abs(got[i] - expected[i]));
  }
  // JPEG is lossy: quantisation moves a smooth image by a level or two (measured here: mean 0.5,
  // max 2); the bounds leave room for another encoder version, a broken decode is off by tens.
  CHECK(total / static_cast<double>(got.size()) < 2.0);
  CHECK(largest <= 8);
  // Grey JPEGs (one component) decode to three equal channels too.
  data::write_jpeg(path, random_image(4, 4, 1), 90);
  const Tensor grey = data::read_image(path);
  CHECK(channel(grey, 0) == channel(grey, 1));
  CHECK(channel(grey, 0) == channel(grey, 2));
}

TEST_CASE("JPEGs decode to the pixels PIL decodes: chroma subsampling, grey, CMYK, progressive, damaged data") {
  // tests/reference/make_jpeg_constants.py wrote the files with PIL and decoded them with it.
  for (const test::jpeg_reference::JpegCase& reference : test::jpeg_reference::kCases) {
    CAPTURE(reference.what);
    const Tensor image = data::decode_image(reference.file, reference.what);
    REQUIRE(image.sizes() == Shape{reference.height, reference.width, 3});
    const std::vector<double> got = test::values(image);
    size_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) differing += got[i] != reference.rgb[i];
    CHECK(differing == 0);
  }
}

TEST_CASE("a BMP and the first frame of a two-frame GIF decode to their RGB pixels") {
  test::TempDir dir;
  // A 2 x 2, 24-bit BMP: rows stored bottom-up, BGR, each row padded to 4 bytes.
  std::string bmp = std::string("BM") + std::string("\x46\0\0\0\0\0\0\0\x36\0\0\0", 12) +
                    std::string("\x28\0\0\0\x02\0\0\0\x02\0\0\0\x01\0\x18\0\0\0\0\0\x10\0\0\0", 24) +
                    std::string(16, '\0');
  const std::string bottom_row("\x03\x02\x01\x06\x05\x04\0\0", 8), top_row("\x09\x08\x07\x0c\x0b\x0a\0\0", 8);
  bmp += bottom_row + top_row;
  write_text(dir.path() + "/tiny.bmp", bmp);
  CHECK(test::values(data::read_image(dir.path() + "/tiny.bmp")) ==
        std::vector<double>{7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6});
  // Made by PIL: a 3 x 2 palette GIF, frame 1 (red, green, blue / (10, 20, 30), red, green),
  // frame 2 all (10, 20, 30).
  const std::vector<uint8_t> gif = {
      0x47, 0x49, 0x46, 0x38, 0x37, 0x61, 0x03, 0x00, 0x02, 0x00, 0x81, 0x00, 0x00, 0xff, 0x00, 0x00, 0x00, 0xff,
      0x00, 0x00, 0x00, 0xff, 0x0a, 0x14, 0x1e, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00, 0x00, 0x08,
      0x08, 0x00, 0x01, 0x04, 0x10, 0x30, 0x40, 0x60, 0x40, 0x00, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00,
      0x2c, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00, 0x81, 0x0a, 0x14, 0x1e, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x08, 0x07, 0x00, 0x01, 0x08, 0x0c, 0x20, 0x30, 0x20, 0x00, 0x3b};
  const Tensor frame = data::decode_image(gif, "two_frames.gif");
  CHECK(frame.sizes() == Shape{2, 3, 3});
  CHECK(test::values(frame) == std::vector<double>{255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30, 255, 0, 0, 0, 255, 0});

  // Cut anywhere before the first frame's data ends (its 0 terminator is byte 45), the file is
  // refused, as PIL refuses it; cut later, inside the second frame, the first frame is whole.
  for (size_t length = 6; length < gif.size(); ++length) {
    CAPTURE(length);
    const std::vector<uint8_t> cut(gif.begin(), gif.begin() + static_cast<std::ptrdiff_t>(length));
    if (length <= 45) {
      CHECK_THROWS_WITH_AS(data::decode_image(cut, "cut.gif"),
                           doctest::Contains("read_image: 'cut.gif' is a truncated GIF: it ends at byte"), Error);
    } else {
      CHECK(test::values(data::decode_image(cut, "cut.gif")) == test::values(frame));
    }
  }
}

TEST_CASE("a missing, empty, non-image or truncated file fails naming the file and the decoder's reason") {
  test::TempDir dir;
  const std::string missing = dir.path() + "/missing.png";
  CHECK(decode_error(missing) == "read_image: cannot open '" + missing + "': No such file or directory");
  const std::string empty_file = dir.path() + "/empty.jpg";
  write_text(empty_file, "");
  CHECK(decode_error(empty_file) == "read_image: '" + empty_file + "' is empty (0 bytes), not an image");
  const std::string text = dir.path() + "/notes.png";
  write_text(text, "these are not the pixels you are looking for\n");
  CHECK(decode_error(text) == "read_image: cannot decode '" + text +
                                  "': not a JPEG, PNG, BMP or GIF file (it begins with none of their signatures)");
  // A PNG's chunk lengths are checked first (Note [Image size before decoding] in
  // data/image.cpp), so a truncated one is refused before stb allocates.
  const std::string whole_png = dir.path() + "/whole.png", truncated_png = dir.path() + "/truncated.png";
  data::write_png(whole_png, random_image(16, 16, 3));
  const std::string png_bytes = read_text(whole_png);
  write_text(truncated_png, png_bytes.substr(0, png_bytes.size() / 2));
  const std::string png_message = decode_error(truncated_png);
  CHECK(png_message.starts_with("read_image: '" + truncated_png +
                                "' is a truncated or corrupt PNG: its IDAT chunk at byte "));
  // An empty first IDAT chunk: stb_image would copy it from a null pointer (docs/testing.md).
  const size_t idat = png_bytes.find("IDAT") - 4;                    // the chunk starts with its length
  const std::string empty_idat("\0\0\0\0IDAT\x35\xaf\x06\x1e", 12);  // length 0, type, CRC
  const std::string empty_first_idat = dir.path() + "/empty_first_idat.png";
  write_text(empty_first_idat, png_bytes.substr(0, idat) + empty_idat + png_bytes.substr(idat));
  CHECK(decode_error(empty_first_idat) == "read_image: '" + empty_first_idat + "' is a PNG whose first IDAT chunk is " +
                                              "empty (at byte " + std::to_string(idat) +
                                              "), which stb_image does not decode safely");
  const std::string directory = dir.path() + "/folder.png";
  fs::create_directory(directory);
  CHECK(decode_error(directory) == "read_image: '" + directory + "' is a directory, not an image file");
}

TEST_CASE("an image whose header claims more pixels than the limit is refused before it is decoded") {
  test::TempDir dir;
  const std::string path = dir.path() + "/wide.png";
  data::write_png(path, random_image(12, 30, 3));
  const std::string bytes = read_text(path);
  const std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  CHECK(data::decode_image(view, path, 360).sizes() == Shape{12, 30, 3});
  try {
    data::decode_image(view, path, 359);
    FAIL("an image over the pixel limit was decoded");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) == "read_image: '" + path +
                                           "' claims 30 x 12 pixels, more than the 359 an image "
                                           "may have (a corrupt file or a decompression bomb)");
  }
  // A BMP stored top-down has a negative height in its header; the limit holds for it too.
  const uint8_t top_down_bmp[] = {'B', 'M', 0x4e, 0, 0,    0, 0, 0,    0, 0, 0x36, 0, 0, 0, 0x28, 0, 0, 0,
                                  3,   0,   0,    0, 0x02, 0, 0, 0xff, 1, 0, 0x18, 0, 0, 0, 0,    0, 0, 0,
                                  0,   0,   0,    0, 0,    0, 0, 0,    0, 0, 0,    0, 0, 0, 0,    0, 0, 0};
  CHECK_THROWS_WITH_AS(data::decode_image(top_down_bmp, "top_down.bmp", 1000),
                       doctest::Contains("'top_down.bmp' claims 3 x 16777214 pixels"), Error);
}

TEST_CASE("a truncated JPEG fails with libjpeg's reason, even when only its end-of-image marker is missing") {
  // PIL raises for all of these too (unless ImageFile.LOAD_TRUNCATED_IMAGES is set).
  const std::string truncated_error =
      "': libjpeg says 'Premature end of JPEG file' (a truncated, corrupt or unsupported file)";
  const std::string expected = "read_image: cannot decode 'cut.jpg" + truncated_error;
  const auto& cases = test::jpeg_reference::kCases;
  for (const auto* reference : {&cases[0], &cases[5]}) {  // a baseline and a progressive file
    CAPTURE(reference->what);
    const std::span<const uint8_t> file(reference->file);
    for (const size_t kept : {file.size() / 2, file.size() - 2}) {
      CAPTURE(kept);
      CHECK_THROWS_WITH_AS(data::decode_image(file.first(kept), "cut.jpg"), expected.c_str(), Error);
    }
  }
  test::TempDir dir;  // and through read_image, naming the path
  const std::string path = dir.path() + "/truncated.jpg";
  const std::vector<uint8_t>& whole = cases[0].file;
  write_text(path, std::string(whole.begin(), whole.begin() + 300));
  CHECK(decode_error(path) == "read_image: cannot decode '" + path + truncated_error);
}

TEST_CASE(
    "a corrupt JPEG fails with libjpeg's reason, and one with fill bytes before its first marker is not decoded") {
  test::TempDir dir;
  const std::string path = dir.path() + "/huffman.jpg";
  data::write_jpeg(path, random_image(8, 8, 3));
  std::string bytes = read_text(path);
  const size_t dht = bytes.find(std::string("\xFF\xC4", 2));
  REQUIRE(dht != std::string::npos);
  // A Huffman table of 16 x 32 codes, more than the 256 a table can hold (stb_image wrote past its
  // table on such a file: docs/testing.md).
  for (size_t length = 1; length <= 16; ++length) bytes[dht + 4 + length] = 0x20;
  write_text(path, bytes);
  CHECK(decode_error(path) == "read_image: cannot decode '" + path +
                                  "': libjpeg says 'Bogus Huffman table definition' (a truncated, corrupt or "
                                  "unsupported file)");
  // libjpeg wants the start-of-image marker first; stb_image would skip 0xFF fill bytes before it
  // and decode the file with its own JPEG decoder (Note [Which decoder sees a file] in data/image.cpp).
  const std::vector<uint8_t>& good = test::jpeg_reference::kCases[0].file;
  const std::string padded = std::string("\xFF", 1) + std::string(good.begin(), good.end());
  CHECK_THROWS_WITH_AS(data::decode_image(as_bytes(padded), "padded.jpg"),
                       "read_image: cannot decode 'padded.jpg': not a JPEG, PNG, BMP or GIF file (it begins with none "
                       "of their signatures)",
                       Error);
}

TEST_CASE("a JPEG whose header claims more pixels than the limit is refused before its pixels are allocated") {
  const test::jpeg_reference::JpegCase& reference = test::jpeg_reference::kCases[0];  // 13 x 11
  CHECK(data::decode_image(reference.file, "small.jpg", 143).sizes() == Shape{11, 13, 3});
  CHECK_THROWS_WITH_AS(data::decode_image(reference.file, "small.jpg", 142),
                       "read_image: 'small.jpg' claims 13 x 11 pixels, more than the 142 an image may have (a corrupt "
                       "file or a decompression bomb)",
                       Error);
  // The frame header (SOF0: length, precision, height, width) made to claim 60000 x 50000 pixels:
  // 9 GB of pixels, refused with the default limit before a byte of them is allocated.
  std::vector<uint8_t> bomb = reference.file;
  const std::string sof0("\xFF\xC0", 2);
  const auto at = std::search(bomb.begin(), bomb.end(), sof0.begin(), sof0.end(),
                              [](uint8_t byte, char expected) { return byte == static_cast<uint8_t>(expected); });
  REQUIRE(at != bomb.end());
  const size_t sof = static_cast<size_t>(at - bomb.begin());
  const uint8_t sizes[4] = {50000 >> 8, 50000 & 0xFF, 60000 >> 8, 60000 & 0xFF};  // height, width; big-endian
  std::copy(sizes, sizes + 4, bomb.begin() + static_cast<std::ptrdiff_t>(sof + 5));
  CHECK_THROWS_WITH_AS(data::decode_image(bomb, "bomb.jpg"),
                       doctest::Contains("'bomb.jpg' claims 60000 x 50000 pixels, more than the 178956970"), Error);
}

namespace {

// The decoding-time bomb of Note [A cap on progressive scans] in data/jpeg_decoder.cpp: the
// reference progressive file (9 x 19 pixels, 10 scans) with its last scan (start-of-scan marker to
// the end-of-image marker) repeated up to `total` scans. libjpeg decodes the repeats, warning of a
// bogus progression.
std::string progressive_jpeg_with_scans(size_t total) {
  const std::vector<uint8_t>& file = test::jpeg_reference::kCases[5].file;
  const std::string text(file.begin(), file.end());
  size_t scans = 0;
  for (size_t at = text.find("\xFF\xDA"); at != std::string::npos; at = text.find("\xFF\xDA", at + 2)) ++scans;
  REQUIRE(scans == 10);
  const size_t last_scan = text.rfind("\xFF\xDA");
  const std::string head = text.substr(0, text.size() - 2), repeated = text.substr(last_scan, head.size() - last_scan);
  std::string bomb = head;
  for (size_t extra = scans; extra < total; ++extra) bomb += repeated;
  return bomb + "\xFF\xD9";
}

}  // namespace

TEST_CASE("a progressive JPEG of more than 256 scans is refused, however small its scans") {
  const std::string at_cap = progressive_jpeg_with_scans(256), past_cap = progressive_jpeg_with_scans(257);
  CHECK(data::decode_image(as_bytes(at_cap), "256.jpg").sizes() == Shape{9, 19, 3});
  CHECK_THROWS_WITH_AS(data::decode_image(as_bytes(past_cap), "257.jpg"),
                       "read_image: cannot decode '257.jpg': a progressive JPEG of more than 256 scans over 19 x 9 "
                       "pixels (encoders write about 10; so many is a corrupt file or a decoding-time bomb)",
                       Error);
}

TEST_CASE("an image at the pixel limit may have 16 progressive scans: the cap bounds scans times pixels") {
  // 12000 x 12000 pixels over 256 scans cost 65 s to decode, inside both the pixel limit and the
  // scan count; so an image as large as the limit gets 16 scans. Lowering the limit to the
  // reference file's own 171 pixels puts it at the limit without a 178-megapixel file.
  const int64_t limit = 9 * 19;
  CHECK(data::decode_image(as_bytes(progressive_jpeg_with_scans(16)), "16.jpg", limit).sizes() == Shape{9, 19, 3});
  CHECK_THROWS_WITH_AS(data::decode_image(as_bytes(progressive_jpeg_with_scans(17)), "17.jpg", limit),
                       doctest::Contains("a progressive JPEG of more than 16 scans over 19 x 9 pixels"), Error);
  CHECK(data::decode_image(as_bytes(progressive_jpeg_with_scans(32)), "32.jpg", 2 * limit).sizes() ==
        Shape{9, 19, 3});  // twice the limit: twice the scans
  CHECK_THROWS_WITH_AS(data::decode_image(as_bytes(progressive_jpeg_with_scans(33)), "33.jpg", 2 * limit),
                       doctest::Contains("more than 32 scans"), Error);
}

TEST_CASE("a BMP whose pixel rows run past the end of the file, or start inside its headers, is refused") {
  // stb_image would decode the missing rows as zeros (a black image) and, for the second file,
  // read its pixels through a palette it never filled (data/image_checks.cpp).
  const std::string header = std::string("BM") + std::string("\x56\xbf\x02\0\0\0\0\0\x36\0\0\0", 12) +
                             std::string("\x28\0\0\0\x2c\x01\0\0\xc8\0\0\0\x01\0\x18\0", 16) +
                             std::string(24, '\0');  // 300 x 200, 24 bits, pixels at byte 54
  CHECK_THROWS_WITH_AS(data::decode_image(as_bytes(header), "short.bmp"),
                       "read_image: 'short.bmp' is a truncated BMP: its header puts 300 x 200 pixels of 24 bits at "
                       "bytes 54 to 180054, but the file has 54 bytes",
                       Error);
  test::TempDir dir;  // through read_image, naming the path, one byte short
  const std::string path = dir.path() + "/one_byte_short.bmp";
  write_text(path, header + std::string(180000 - 1, '\x7f'));
  CHECK(decode_error(path) == "read_image: '" + path +
                                  "' is a truncated BMP: its header puts 300 x 200 pixels of 24 bits at bytes 54 to "
                                  "180054, but the file has 180053 bytes");
  write_text(path, header + std::string(180000, '\x7f'));
  CHECK(test::values(data::read_image(path)) == std::vector<double>(300 * 200 * 3, 127.0));
  // An 8-bit BMP whose pixels begin at byte 30, inside its 54 bytes of headers.
  std::string inside = header;
  inside[10] = 30;  // the pixels' offset
  inside[28] = 8;   // bits a pixel
  inside += std::string(300 * 200, '\0');
  CHECK_THROWS_WITH_AS(data::decode_image(as_bytes(inside), "inside.bmp"),
                       "read_image: 'inside.bmp' is a BMP that stb_image misreads: its 8-bit pixels at byte 30 begin "
                       "before the end of its headers and palette as stb_image reads them",
                       Error);
}

TEST_CASE("decoding in several threads at once gives each bad file its own reason") {
  // stb's failure reason is per thread (Note [Decoding in worker threads] in data/image.cpp): with a
  // shared one, a thread could report the reason of another thread's failure. libjpeg's message is
  // per decode.
  test::TempDir dir;
  const std::string good = dir.path() + "/good.jpg", not_gif = dir.path() + "/not.gif", rle = dir.path() + "/rle.bmp",
                    truncated = dir.path() + "/truncated.jpg";
  data::write_jpeg(good, random_image(64, 64, 3));
  write_text(not_gif, "GIF8? no: plain text");
  // A BMP compressed with run lengths (compression 1), which stb does not decode.
  write_text(rle, std::string("BM") + std::string("\x3a\0\0\0\0\0\0\0\x36\0\0\0", 12) +
                      std::string("\x28\0\0\0\x01\0\0\0\x01\0\0\0\x01\0\x08\0\x01\0\0\0", 20) + std::string(24, '\0'));
  const std::string bytes = read_text(good);
  write_text(truncated, bytes.substr(0, bytes.size() / 3));
  const std::vector<std::string> bad = {not_gif, rle, truncated};
  std::vector<std::string> expected;
  for (const std::string& path : bad) expected.push_back(decode_error(path));
  REQUIRE(expected[0].find("stb_image says 'unknown image type'") != std::string::npos);
  REQUIRE(expected[1].find("stb_image says 'BMP RLE'") != std::string::npos);
  REQUIRE(expected[2].find("libjpeg says 'Premature end of JPEG file'") != std::string::npos);
  const std::vector<double> good_pixels = test::values(data::read_image(good));

  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < 30; ++i) {
        const size_t which = (i + t) % bad.size();
        if (decode_error(bad[which]) != expected[which]) failures[t] = "wrong message for " + bad[which];
        if (test::values(data::read_image(good)) != good_pixels) failures[t] = "wrong pixels";
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("the writers name the file and what is wrong with the image or the write") {
  test::TempDir dir;
  const std::string path = dir.path() + "/x.png";
  CHECK_THROWS_WITH_AS(data::write_png(path, zeros({4, 4, 3})),
                       doctest::Contains(("write_png: '" + path +
                                          "': expected a u8 [H, W, C] image on the CPU "
                                          "(decoded pixels, before ToTensor), got [4, 4, 3] f32")
                                             .c_str()),
                       Error);
  CHECK_THROWS_WITH_AS(data::write_png(path, random_image(4, 4, 5)), doctest::Contains("expected 1 to 4 channels"),
                       Error);
  CHECK_THROWS_WITH_AS(data::write_jpeg(path, random_image(4, 4, 3), 0),
                       doctest::Contains("quality must be in [1, 100]"), Error);
  const std::string nowhere = dir.path() + "/no/such/dir/x.jpg";
  CHECK_THROWS_WITH_AS(data::write_jpeg(nowhere, random_image(4, 4, 3)),
                       doctest::Contains(("write_jpeg: cannot create '" + nowhere + "'").c_str()), Error);
}

TEST_CASE("image files are recognised by extension in any letter case") {
  for (const char* name : {"a.jpg", "b.JPEG", "dir.d/c.Png", "d.bmp", "e.GIF", "/x/y/f.jpeg"})
    CHECK(data::has_image_extension(name));
  for (const char* name : {"a.txt", "png", "dir.png/readme", "a.jpg.bak", ".", "a.tif"})
    CHECK_FALSE(data::has_image_extension(name));
}
