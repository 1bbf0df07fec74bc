#pragma once
// defines: check_pixel_limit, check_png_chunk_lengths, check_bmp_pixel_data, check_gif_first_frame —
//          what an image file's
//          header claims, checked against the pixel limit and the file's bytes before a decoder
//          allocates or reads for it (Note [Image size before decoding] in data/image.cpp).
#include <cstdint>
#include <span>
#include <string>

namespace sg::data {

// Throws an sg::Error naming the file `name` when a width x height image is over `max_pixels`.
void check_pixel_limit(const std::string& name, int64_t width, int64_t height, int64_t max_pixels);

// Throws an sg::Error naming `name` when `bytes` are a PNG whose chunks claim more bytes than
// the file holds (stb_image allocates a chunk's claimed length before it reads the chunk), or
// whose first IDAT chunk is empty (stb_image would copy it from a null pointer).
void check_png_chunk_lengths(std::span<const uint8_t> bytes, const std::string& name);

// Throws an sg::Error naming `name` when `bytes` are an uncompressed BMP whose pixel rows, where
// and as long as its header says, run past the end of the file (stb_image would decode the
// missing bytes as zeros), or leave no room for the palette stb_image reads before them.
void check_bmp_pixel_data(std::span<const uint8_t> bytes, const std::string& name);

// Throws an sg::Error naming `name` when `bytes` are a GIF that ends before the data of its first
// image does (stb_image would return the pixels it has, the rest filled in, where PIL refuses).
void check_gif_first_frame(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace sg::data
