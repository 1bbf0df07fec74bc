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
// element type or number of dims), sizes that overflow or announce more than 4 GiB, a truncated
// header or payload, bytes past the payload. The header is checked before memory is taken for
// it, memory then grows with the bytes that arrive, and at most 64 KiB past the payload are read
// (so a gzip bomb behind a small header is refused at once).
Tensor read_idx(const std::string& path, int64_t ndim);

}  // namespace sg::data
