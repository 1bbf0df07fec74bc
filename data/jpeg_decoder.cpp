#include "data/jpeg_decoder.h"

#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <vector>

// After <cstddef> and <cstdio>: jpeglib.h uses size_t and FILE without including their headers.
#include <jerror.h>
#include <jpeglib.h>

#include "core/error.h"
#include "core/factory.h"
#include "data/image_checks.h"

// Note [JPEG as PIL decodes it]
// PIL decodes JPEGs with libjpeg-turbo at libjpeg's default settings (the accurate integer inverse
// DCT, smooth chroma upsampling), as we do here, so the pixels are the same, bit for bit
// (tests/test_image.cpp compares with PIL's decodes of files PIL wrote). What a file holds becomes
// RGB as PIL's convert("RGB") makes it:
//   1 component (grey): the grey repeated into the three channels;
//   3 components: libjpeg's conversion from YCbCr (or none, when an Adobe marker says RGB);
//   4 components: libjpeg gives CMYK (converting YCCK, as an Adobe marker may declare, to CMYK).
//     PIL takes every 4-component JPEG to follow Adobe's convention of storing the values
//     inverted (its raw mode "CMYK;I"), whether or not the file has an Adobe marker, and then
//     computes R = (255 - K) - round(C (255 - K) / 255) from the un-inverted C and K (and G, B
//     from M, Y), so from the stored c and k: R = k - round((255 - c) k / 255).
// Other numbers of components are refused, as PIL refuses them.
// libjpeg decodes past corrupt entropy-coded data with a warning, filling in the damaged blocks;
// PIL ignores such warnings, and so do we. A file that ends before libjpeg reaches its
// end-of-image marker is truncated: PIL raises an error for it (unless ImageFile.
// LOAD_TRUNCATED_IMAGES is set) even when only that marker is missing, and so do we. libjpeg's
// memory source reports running out of bytes with the warning "Premature end of JPEG file" (then
// pretends the file ended properly); that warning is made an error.
//
// Note [libjpeg errors through setjmp and longjmp]
// libjpeg reports a fatal error by calling the error manager's error_exit, which must not return
// (the default calls exit()). An exception thrown there would unwind through libjpeg's C frames,
// which C code is not written for: undefined behaviour. So, as libjpeg's own example does,
// error_exit keeps the message and longjmps back to a setjmp taken before the libjpeg calls, and
// C++ code outside them throws. longjmp skips destructors, so the two functions that call setjmp
// (read_header, decode_rows) own no object with one, and keep what they change after setjmp in
// the Decoder they are given, not in their own locals (which longjmp may leave stale). The
// Decoder, and with it libjpeg's memory, is destroyed by its owner, failure or not.
//
// Note [A cap on progressive scans]
// A progressive JPEG refines its coefficients over several scans, and libjpeg passes over every
// block of the image once per scan. A scan can be a few bytes (one end-of-band run over the whole
// image), and libjpeg accepts any number of them, repeats included (it only warns of a "bogus
// progression"). So a small file over a large image is a decoding-time bomb: a 94 KB file of a
// 4000 x 4000 grey image with its last 31-byte scan repeated 1000 times kept PIL (libjpeg) busy
// 14 s here, and the time grows with the repeats and the pixel count, well inside the pixel
// limit. Encoders write 6 (grey) to 10 (colour) scans with libjpeg's standard script; we stop at
// kMaxScans, as libjpeg-turbo's djpeg -maxscans and other decoders do (nvImageCodec: 256), from
// libjpeg's progress monitor, which libjpeg calls while it reads the scans.
// A count alone still lets a large image cost minutes: each scan is a pass over every block, so
// 256 scans over 12000 x 12000 pixels took 65 s. The cap therefore also bounds the work, scans
// times pixels, to what kScansAtPixelLimit scans over the largest image allowed (max_pixels)
// would cost: a few seconds at most, and more scans than encoders write at any size.

namespace sg::data {

namespace {

// libjpeg's error manager, plus where a fatal error jumps to and its message.
struct ErrorManager {
  jpeg_error_mgr base;  // first, so that libjpeg's pointer to it is a pointer to the whole
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool too_many_scans = false;  // the failure is ours (Note [A cap on progressive scans]), not libjpeg's
  int64_t max_scans = 0;        // set once the header gives the image's size
};

constexpr int64_t kMaxScans = 256;
constexpr int64_t kScansAtPixelLimit = 16;

// Note [A cap on progressive scans]: kMaxScans, or fewer for an image so large that the scans
// would cost more than kScansAtPixelLimit passes over an image of max_pixels.
int64_t scan_cap(int64_t pixels, int64_t max_pixels) {
  return std::clamp(kScansAtPixelLimit * max_pixels / std::max<int64_t>(pixels, 1), kScansAtPixelLimit, kMaxScans);
}

[[noreturn]] void fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// libjpeg's messages other than fatal errors: traces (level >= 0) and warnings (level -1) are
// dropped, as PIL drops them, but for running out of bytes (Note [JPEG as PIL decodes it]).
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) fail(cinfo);
}

// libjpeg's progress monitor: fails a progressive file once it is past its scan cap.
void check_scan_count(j_common_ptr common) {
  auto* cinfo = reinterpret_cast<j_decompress_ptr>(common);
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (!cinfo->progressive_mode || cinfo->input_scan_number <= errors->max_scans) return;
  errors->too_many_scans = true;
  std::longjmp(errors->jump, 1);
}

// A libjpeg decompressor that reports through fail and on_message; destroying it frees libjpeg's
// memory, whatever state a failure left it in (jpeg_destroy_decompress accepts any).
struct Decoder {
  jpeg_decompress_struct cinfo{};
  ErrorManager errors{};
  jpeg_progress_mgr progress{};

  Decoder() {
    cinfo.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = fail;
    errors.base.emit_message = on_message;
    progress.progress_monitor = check_scan_count;
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

// Reads the markers up to the first scan: sizes, components, tables. False when libjpeg failed
// (Note [libjpeg errors through setjmp and longjmp]).
bool read_header(Decoder& decoder, std::span<const uint8_t> bytes) {
  if (setjmp(decoder.errors.jump) != 0) return false;
  jpeg_create_decompress(&decoder.cinfo);
  decoder.cinfo.progress = &decoder.progress;  // after jpeg_create_decompress, which clears it
  jpeg_mem_src(&decoder.cinfo, bytes.data(), bytes.size());
  jpeg_read_header(&decoder.cinfo, TRUE);
  return true;
}

// PIL's MULDIV255: a * b / 255, rounded, in integers.
int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

void grey_to_rgb(const uint8_t* grey, uint8_t* rgb, size_t width) {
  for (size_t x = 0; x < width; ++x) rgb[3 * x] = rgb[3 * x + 1] = rgb[3 * x + 2] = grey[x];
}

// Adobe's inverted CMYK to RGB as PIL converts it (Note [JPEG as PIL decodes it]).
void inverted_cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, size_t width) {
  for (size_t x = 0; x < width; ++x) {
    const int k = cmyk[4 * x + 3];
    for (size_t c = 0; c < 3; ++c) rgb[3 * x + c] = static_cast<uint8_t>(k - muldiv255(255 - cmyk[4 * x + c], k));
  }
}

// Decodes every row into `rgb` (u8 [H, W, 3]), an RGB file directly, another through `row` (one
// row as libjpeg outputs it). False when libjpeg failed.
bool decode_rows(Decoder& decoder, uint8_t* rgb, uint8_t* row) {
  if (setjmp(decoder.errors.jump) != 0) return false;
  jpeg_decompress_struct& cinfo = decoder.cinfo;
  jpeg_start_decompress(&cinfo);
  const size_t width = cinfo.output_width;
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* out = rgb + size_t{cinfo.output_scanline} * width * 3;
    JSAMPROW target = cinfo.out_color_space == JCS_RGB ? out : row;
    jpeg_read_scanlines(&cinfo, &target, 1);
    if (cinfo.out_color_space == JCS_GRAYSCALE) grey_to_rgb(row, out, width);
    if (cinfo.out_color_space == JCS_CMYK) inverted_cmyk_to_rgb(row, out, width);
  }
  jpeg_finish_decompress(&cinfo);  // reads on to the end-of-image marker, so a missing one is found
  return true;
}

}  // namespace

bool is_jpeg(std::span<const uint8_t> bytes) { return bytes.size() >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8; }

Tensor decode_jpeg(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels) {
  Decoder decoder;
  const auto libjpeg_failure = [&] {
    if (decoder.errors.too_many_scans)
      return detail::concat("read_image: cannot decode '", name, "': a progressive JPEG of more than ",
                            decoder.errors.max_scans, " scans over ", decoder.cinfo.image_width, " x ",
                            decoder.cinfo.image_height,
                            " pixels (encoders write about 10; so many is a corrupt file or a decoding-time bomb)");
    return detail::concat("read_image: cannot decode '", name, "': libjpeg says '", decoder.errors.message,
                          "' (a truncated, corrupt or unsupported file)");
  };
  if (!read_header(decoder, bytes)) throw Error(libjpeg_failure());
  jpeg_decompress_struct& cinfo = decoder.cinfo;
  const int64_t height = cinfo.image_height, width = cinfo.image_width;
  check_pixel_limit(name, width, height, max_pixels);
  decoder.errors.max_scans = scan_cap(width * height, max_pixels);
  const int components = cinfo.num_components;
  SG_CHECK(components == 1 || components == 3 || components == 4, "read_image: cannot decode '", name, "': a JPEG of ",
           components, " colour components (PIL, and so read_image, decodes 1, 3 or 4)");
  cinfo.out_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  Tensor image = empty({height, width, 3}, {DType::u8, Device::cpu()});
  std::vector<uint8_t> row(static_cast<size_t>(width * components));
  if (!decode_rows(decoder, image.data_ptr<uint8_t>(), row.data())) throw Error(libjpeg_failure());
  return image;
}

}  // namespace sg::data
