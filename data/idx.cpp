#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "core/factory.h"

namespace sg::data {

namespace {

// The largest payload read_idx accepts, so that a corrupt header cannot ask for all memory. Far
// above the MNIST family: Fashion-MNIST's largest file holds 47 MB.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 32;

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
      SG_FAIL("read_idx: ", path, ": read failed (", code == Z_ERRNO ? std::strerror(errno) : message, ")");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// The two ways a payload can disagree with its header, worded once for raw and .gz files.
Error truncated(const std::string& path, const Shape& sizes, uint64_t payload, uint64_t found) {
  return Error(detail::concat("read_idx: ", path, ": the header announces ", shape_str(sizes), " = ", payload,
                              " payload bytes, found only ", found, " (truncated file)"));
}
Error too_long(const std::string& path, const Shape& sizes, uint64_t payload, const std::string& extra) {
  return Error(detail::concat("read_idx: ", path, ": expected the file to end after the ", payload,
                              " payload bytes of ", shape_str(sizes), ", found ", extra, " more bytes"));
}

// The payload, read in growing pieces: memory follows the bytes that actually arrive, not the
// header's claim (a .gz file's decompressed size is unknown until its end). Stops with an error
// as soon as the stream ends early or holds more than `payload` bytes; of extra bytes it reads
// at most kMaxTrailingCount, so a gzip bomb behind a small header costs nothing.
std::vector<unsigned char> read_payload(gzFile file, const std::string& path, uint64_t payload, const Shape& sizes) {
  constexpr size_t kFirstPiece = size_t{1} << 20;
  constexpr size_t kMaxTrailingCount = size_t{1} << 16;
  std::vector<unsigned char> bytes;
  size_t have = 0;
  while (have < payload) {
    bytes.resize(std::min<uint64_t>(payload, std::max(kFirstPiece, 2 * bytes.size())));
    const size_t got = read_some(file, path, bytes.data() + have, bytes.size() - have);
    have += got;
    if (have < bytes.size()) break;  // the end of the stream
  }
  if (have < payload) throw truncated(path, sizes, payload, have);
  std::vector<unsigned char> scratch(kMaxTrailingCount + 1);
  const size_t trailing = read_some(file, path, scratch.data(), scratch.size());
  if (trailing > kMaxTrailingCount)
    throw too_long(path, sizes, payload, "more than " + std::to_string(kMaxTrailingCount));
  if (trailing > 0) throw too_long(path, sizes, payload, std::to_string(trailing));
  return bytes;
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
  SG_CHECK(file != nullptr, "read_idx: cannot open ", path, ": ", errno != 0 ? std::strerror(errno) : "out of memory");
  gzbuffer(file.get(), 1 << 17);

  constexpr uint32_t kUnsignedBytes = 0x08;
  const uint32_t expected_magic = (kUnsignedBytes << 8) | static_cast<uint32_t>(ndim);
  const auto header_bytes = static_cast<size_t>(4 + 4 * ndim);
  std::vector<unsigned char> header(header_bytes);
  const size_t header_read = read_some(file.get(), path, header.data(), 4);
  SG_CHECK(header_read == 4, "read_idx: ", path, ": expected a 4-byte magic number, found a file of ", header_read,
           " bytes");
  const uint32_t magic = big_endian_u32(header.data());
  SG_CHECK(magic == expected_magic, "read_idx: ", path, ": expected the magic number ", hex32(expected_magic),
           " (unsigned bytes, ", ndim, " dims), found ", hex32(magic));

  const size_t dims_read = read_some(file.get(), path, header.data() + 4, header_bytes - 4);
  SG_CHECK(dims_read == header_bytes - 4, "read_idx: ", path, ": expected a ", header_bytes, "-byte header (", ndim,
           " sizes), found ", 4 + dims_read, " bytes");
  Shape sizes(ndim);
  for (int64_t d = 0; d < ndim; ++d) sizes[d] = big_endian_u32(header.data() + 4 + 4 * d);
  // The header is checked before anything is allocated for it.
  SG_CHECK(fits_int64_indexing(sizes), "read_idx: ", path, ": the sizes ", shape_str(sizes), " overflow int64");
  const int64_t payload = numel_of(sizes);
  SG_CHECK(static_cast<uint64_t>(payload) <= kMaxPayloadBytes, "read_idx: ", path, ": the header announces ",
           shape_str(sizes), " = ", payload, " payload bytes, more than the ", kMaxPayloadBytes,
           " bytes read_idx accepts");
  std::error_code no_size;
  if (gzdirect(file.get())) {  // not compressed: the file's size tells the payload's
    const uint64_t on_disk = std::filesystem::file_size(path, no_size) - header_bytes;
    if (!no_size && on_disk < static_cast<uint64_t>(payload)) throw truncated(path, sizes, payload, on_disk);
    if (!no_size && on_disk > static_cast<uint64_t>(payload))
      throw too_long(path, sizes, payload, std::to_string(on_disk - payload));
  }

  const std::vector<unsigned char> bytes = read_payload(file.get(), path, static_cast<uint64_t>(payload), sizes);
  Tensor out = empty(sizes, {DType::u8, Device::cpu()});
  std::copy(bytes.begin(), bytes.end(), static_cast<unsigned char*>(out.raw_data()));
  return out;
}

}  // namespace sg::data
