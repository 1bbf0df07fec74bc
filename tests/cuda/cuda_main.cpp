// The GPU test suite's main: every test in tests/cuda/ runs an op on the GPU and compares it
// with the CPU result. Without a usable GPU (a CPU-only build, or no GPU on this machine) the
// whole suite exits with 77, which ctest reports as "Skipped", and says why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "core/cuda_runtime/runtime.h"

int main(int argc, char** argv) {
  if (!sg::cuda::is_available()) {
    std::printf("test_cuda: skipped, no GPU to run on: %s\n", sg::cuda::unavailable_reason().c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
