#pragma once
// defines: read_idx — the IDX file format of MNIST and Fashion-MNIST, gzip-compressed or raw.
//
// An IDX file is a 4-byte magic number 0x0000TTNN (TT: element type, 0x08 for unsigned bytes;
// NN: the number of dims), NN big-endian u32 sizes, then the elements in row-major order.
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace sg::data {

// Reads an IDX file of unsigned bytes with `ndim` dims (3 for images, 1 for labels) into a u8
// tensor of the sizes the header gives. zlib's gzopen reads .gz and raw files alike. Throws an
// sg::Error naming the file and what was expected and found: a wrong magic number (other
// element type or number of dims), a truncated header or payload, bytes past the payload.
Tensor read_idx(const std::string& path, int64_t ndim);

}  // namespace sg::data
