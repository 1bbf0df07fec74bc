// Fuzz target: image decoding as ImageFolder does it (data/image.cpp) on arbitrary bytes: JPEG
// (libjpeg-turbo, the system library), PNG, BMP and GIF (stb_image, compiled into this target:
// stb_image_instrumented.cpp), grey, grey + alpha, RGB, RGBA and CMYK. A file that is not an
// image is an sg::Error naming it; a decoded one is u8 [H, W, 3]. The pixel limit is lowered to
// 2^18 (512 x 512) so that what it lets through stays far under the fuzzer's allocation limit
// (64 MiB) and each input decodes quickly: the check itself is what is tested.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const sg::Tensor image = sg::data::decode_image(std::span<const uint8_t>(data, size), "fuzz input", 1 << 18);
    if (image.dim() != 3 || image.size(2) != 3 || image.dtype() != sg::DType::u8) std::abort();
  } catch (const sg::Error&) {}
  return 0;
}
