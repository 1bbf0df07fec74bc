// Fuzz target: train_gpt's YAML config reader (apps/gpt_config.cpp, yaml-cpp underneath) on
// arbitrary file contents. A bad file is an sg::Error naming the file and the key; a yaml-cpp
// exception escaping (a key that is a list, a tag, a bad alias) is a finding.
#include <cstdint>

#include "apps/gpt_config.h"
#include "core/error.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FuzzInputFile file(".yaml");
  try {
    (void)sg::apps::gpt::load_config(file.write(data, size), {});
  } catch (const sg::Error&) {}
  return 0;
}
