#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/factory.h"

namespace sg::data {

namespace {

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `count` bytes into `dst`; returns how many there were before the end of the file.
// gzread takes an unsigned count, so large reads go in chunks.
size_t read_some(gzFile file, const std::string& path, void* dst, size_t count) {
  constexpr size_t kChunk = size_t{1} << 30;
  size_t done = 0;
  while (done < count) {
    const auto want = static_cast<unsigned>(std::min(kChunk, count - done));
    const int got = gzread(file, static_cast<char*>(dst) + done, want);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      throw Error(detail::concat("read_idx: ", path, ": read failed (",
                                 code == Z_ERRNO ? std::strerror(errno) : message, ")"));
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// Bytes left in the file after what has been read.
size_t count_rest(gzFile file, const std::string& path) {
  std::vector<char> scratch(1 << 16);
  size_t total = 0;
  for (size_t got; (got = read_some(file, path, scratch.data(), scratch.size())) > 0;) total += got;
  return total;
}

std::string hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

uint32_t big_endian_u32(const unsigned char* bytes) {
  return (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) | uint32_t(bytes[3]);
}

}  // namespace

Tensor read_idx(const std::string& path, int64_t ndim) {
  SG_CHECK(ndim >= 1 && ndim <= 255, "read_idx: ", path, ": ndim must be in [1, 255], got ", ndim);
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  SG_CHECK(file != nullptr, "read_idx: cannot open ", path, ": ",
           errno != 0 ? std::strerror(errno) : "out of memory");
  gzbuffer(file.get(), 1 << 17);

  constexpr uint32_t kUnsignedBytes = 0x08;
  const uint32_t expected_magic = (kUnsignedBytes << 8) | static_cast<uint32_t>(ndim);
  const auto header_bytes = static_cast<size_t>(4 + 4 * ndim);
  std::vector<unsigned char> header(header_bytes);
  const size_t header_read = read_some(file.get(), path, header.data(), 4);
  SG_CHECK(header_read == 4, "read_idx: ", path, ": expected a 4-byte magic number, found a file of ",
           header_read, " bytes");
  const uint32_t magic = big_endian_u32(header.data());
  SG_CHECK(magic == expected_magic, "read_idx: ", path, ": expected the magic number ", hex32(expected_magic),
           " (unsigned bytes, ", ndim, " dims), found ", hex32(magic));

  const size_t dims_read = read_some(file.get(), path, header.data() + 4, header_bytes - 4);
  SG_CHECK(dims_read == header_bytes - 4, "read_idx: ", path, ": expected a ", header_bytes,
           "-byte header (", ndim, " sizes), found ", 4 + dims_read, " bytes");
  Shape sizes(ndim);
  int64_t payload = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    sizes[d] = big_endian_u32(header.data() + 4 + 4 * d);
    SG_CHECK(payload <= std::numeric_limits<int64_t>::max() / std::max<int64_t>(sizes[d], 1),
             "read_idx: ", path, ": the sizes ", shape_str(sizes), " overflow");
    payload *= sizes[d];
  }

  Tensor out = empty(sizes, {DType::u8, Device::cpu()});
  const size_t payload_read = read_some(file.get(), path, out.raw_data(), static_cast<size_t>(payload));
  SG_CHECK(payload_read == static_cast<size_t>(payload), "read_idx: ", path, ": the header announces ",
           shape_str(sizes), " = ", payload, " payload bytes, found only ", payload_read, " (truncated file)");
  const size_t trailing = count_rest(file.get(), path);
  SG_CHECK(trailing == 0, "read_idx: ", path, ": expected the file to end after the ", payload,
           " payload bytes of ", shape_str(sizes), ", found ", trailing, " more bytes");
  return out;
}

}  // namespace sg::data
