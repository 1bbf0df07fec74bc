// cuBLAS is opened on the first GPU matmul, not linked (Note [cuBLAS is opened on first use] in
// core/cuda/cublas.cpp): a CPU-only run of a CUDA build never pays for mapping it.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#if SG_WITH_CUDA
#include "core/cuda/cublas.h"
#endif

namespace {

bool process_maps(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a CUDA build maps cuBLAS only when a GPU matmul first asks for it, and finds every entry point") {
#if SG_WITH_CUDA
  CHECK_FALSE(process_maps("libcublas"));
  const sg::cuda::CublasLibrary& api = sg::cuda::cublas();
  CHECK(process_maps("libcublas"));
  CHECK(bool(api.create));
  CHECK(bool(api.set_stream));
  CHECK(bool(api.set_math_mode));
  CHECK(bool(api.gemm_strided_batched_ex));
  CHECK(std::string(api.status_name(CUBLAS_STATUS_NOT_INITIALIZED)) == "CUBLAS_STATUS_NOT_INITIALIZED");
  CHECK(&sg::cuda::cublas() == &api);  // opened once
#else
  CHECK_FALSE(process_maps("libcublas"));  // a CPU-only build has nothing to open
#endif
}
