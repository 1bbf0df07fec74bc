#pragma once
// defines: save_safetensors, load_safetensors — named tensors <-> a .safetensors file, the
//          format Hugging Face's `safetensors` reads (so Python can open our weights).
//
// Note [The safetensors layout]
//   bytes 0..7      N, the header length, as an unsigned 64-bit little-endian integer
//   bytes 8..8+N    a JSON object, padded with spaces so the data starts 8-byte aligned:
//                   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//                    ..., "__metadata__": {"<key>": "<string value>", ...}}
//   the rest        the data section: each tensor's elements, row-major, little-endian, at
//                   [begin, end) counted from the start of the data section.
// dtypes: F32 F64 F16 BF16 I64 I32 U8 BOOL (one byte, 0 or 1). We write tensors back to back
// in name order; the reader accepts any order and checks every length and offset (the tensors
// must cover the data section exactly: no overlap, no gap, nothing after the last one), so a
// truncated or corrupt file is an error naming the file and the problem, never a crash.
#include <map>
#include <string>

#include "core/tensor.h"

namespace sg {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
};

// Writes atomically (core/atomic_file.h): on failure `path` keeps its old contents. Every
// tensor is checked (defined, a name other than "__metadata__") before the file is touched;
// tensors may be non-contiguous views.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor into fresh, contiguous CPU memory.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace sg
