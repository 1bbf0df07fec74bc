// Image files: decoding (stb_image) of the files the tests write, PIL's convert("RGB") rules for
// grey and alpha, every kind of bad file, and decoding from several threads at once.
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dist_harness.h"
#include "helpers.h"

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
}

TEST_CASE("a missing, empty, non-image or truncated file fails naming the file and stb's reason") {
  test::TempDir dir;
  const std::string missing = dir.path() + "/missing.png";
  CHECK(decode_error(missing) == "read_image: cannot open '" + missing + "': No such file or directory");
  const std::string empty_file = dir.path() + "/empty.jpg";
  write_text(empty_file, "");
  CHECK(decode_error(empty_file) == "read_image: '" + empty_file + "' is empty (0 bytes), not an image");
  const std::string text = dir.path() + "/notes.png";
  write_text(text, "these are not the pixels you are looking for\n");
  CHECK(decode_error(text) == "read_image: cannot decode '" + text +
                                  "': stb_image says 'unknown image type' (a truncated, corrupt or unsupported file)");
  // A truncated JPEG is left to stb; a PNG's chunk lengths are checked first (Note [Image size
  // before decoding] in data/image.cpp), so a truncated one is refused before stb allocates.
  const std::string whole = dir.path() + "/whole.jpg", truncated = dir.path() + "/truncated.jpg";
  data::write_jpeg(whole, random_image(16, 16, 3));
  const std::string bytes = read_text(whole);
  write_text(truncated, bytes.substr(0, bytes.size() / 2));
  const std::string message = decode_error(truncated);
  CHECK(message.starts_with("read_image: cannot decode '" + truncated + "': stb_image says '"));
  CHECK(message.find("stb_image says ''") == std::string::npos);  // a reason, not an empty string
  const std::string whole_png = dir.path() + "/whole.png", truncated_png = dir.path() + "/truncated.png";
  data::write_png(whole_png, random_image(16, 16, 3));
  const std::string png_bytes = read_text(whole_png);
  write_text(truncated_png, png_bytes.substr(0, png_bytes.size() / 2));
  const std::string png_message = decode_error(truncated_png);
  CHECK(png_message.starts_with("read_image: '" + truncated_png +
                                "' is a truncated or corrupt PNG: its IDAT chunk at byte "));
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

TEST_CASE("a JPEG whose Huffman table declares more than 256 codes is refused before stb decodes it") {
  // stb would write past its 257-entry table (tests/fuzz/open-findings/README.md).
  test::TempDir dir;
  const std::string path = dir.path() + "/huffman.jpg";
  data::write_jpeg(path, random_image(8, 8, 3));
  std::string bytes = read_text(path);
  const size_t dht = bytes.find(std::string("\xFF\xC4", 2));
  REQUIRE(dht != std::string::npos);
  for (size_t length = 1; length <= 16; ++length) bytes[dht + 4 + length] = 0x20;  // 16 x 32 codes
  write_text(path, bytes);
  CHECK(decode_error(path) == "read_image: '" + path + "' is a corrupt JPEG: the Huffman table at byte " +
                                  std::to_string(dht + 4) + " declares 512 codes, more than the 256 a table can hold");
}

TEST_CASE("decoding in several threads at once gives each bad file its own stb reason") {
  // stb's failure reason is per thread (Note [Decoding in worker threads] in data/image.cpp): with a
  // shared one, a thread could report the reason of another thread's failure.
  test::TempDir dir;
  const std::string good = dir.path() + "/good.jpg", text = dir.path() + "/text.gif",
                    truncated = dir.path() + "/truncated.jpg";
  data::write_jpeg(good, random_image(64, 64, 3));
  write_text(text, "GIF? no: plain text");
  const std::string bytes = read_text(good);
  write_text(truncated, bytes.substr(0, bytes.size() / 3));
  const std::string text_error = decode_error(text), truncated_error = decode_error(truncated);
  REQUIRE(text_error != truncated_error);
  const std::vector<double> good_pixels = test::values(data::read_image(good));

  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const std::string& bad = (i + t) % 2 == 0 ? text : truncated;
        const std::string& expected = (i + t) % 2 == 0 ? text_error : truncated_error;
        if (decode_error(bad) != expected) failures[t] = "wrong message for " + bad;
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
