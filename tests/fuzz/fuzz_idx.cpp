// Fuzz target: the IDX reader (data/idx.cpp), raw and gzip-compressed. The first byte picks the
// number of dims the caller expects (1-4); the rest is the file. The seed corpus holds raw files and
// .gz ones (zlib reads both through one call, so both paths are reached from here).
#include <cstdint>

#include "core/error.h"
#include "data/idx.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static FuzzInputFile file(".idx");
  const int64_t ndim = 1 + data[0] % 4;
  try {
    (void)sg::data::read_idx(file.write(data + 1, size - 1), ndim);
  } catch (const sg::Error&) {}
  return 0;
}
