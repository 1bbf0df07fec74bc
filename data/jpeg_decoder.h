#pragma once
// defines: is_jpeg, decode_jpeg — JPEG files decoded with libjpeg-turbo as PIL decodes them; used
//          by data/image.cpp, which picks the decoder by a file's first bytes.
#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace sg::data {

// True when `bytes` begin with a JPEG's start-of-image marker (0xFF 0xD8), where libjpeg expects it.
bool is_jpeg(std::span<const uint8_t> bytes);

// Decodes a JPEG to u8 [H, W, 3] with libjpeg-turbo, converted to RGB as PIL's convert("RGB")
// converts its decode (Note [JPEG as PIL decodes it] in data/jpeg_decoder.cpp). A JPEG whose
// header announces more than `max_pixels` pixels is refused before anything is allocated for it.
// Throws an sg::Error naming `name` when libjpeg fails, with libjpeg's message, and when the file
// is truncated.
Tensor decode_jpeg(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels);

}  // namespace sg::data
