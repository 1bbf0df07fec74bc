// Fuzz target: the safetensors reader (core/safetensors.cpp) on arbitrary file contents. The
// contract: a bad file is an sg::Error; anything else escaping (a crash, a sanitizer report, another
// exception, an allocation the header talked it into) is a finding.
#include <cstdint>

#include "core/error.h"
#include "core/safetensors.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FuzzInputFile file(".safetensors");
  try {
    const sg::SafetensorsFile loaded = sg::load_safetensors(file.write(data, size));
    for (const auto& [name, tensor] : loaded.tensors) (void)tensor.numel();
  } catch (const sg::Error&) {}
  return 0;
}
