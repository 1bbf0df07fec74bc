// gemm_probe: the program test_blas.cpp runs under different BLAS choices (OPENBLAS_CORETYPE,
// SG_BLAS). Usage: gemm_probe OUT_FILE
// Computes f32 and f64 products of fixed random operands — odd sizes, a transposed view, a
// batch — writes every result element as a double to OUT_FILE and prints blas_description().
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/cpu/blas.h"
#include "syncgrad.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gemm_probe OUT_FILE\n");
    return 2;
  }
  sg::Generator generator(5);
  std::vector<double> values;
  for (const sg::DType dtype : {sg::DType::f32, sg::DType::f64}) {
    const sg::TensorOptions options{dtype};
    const sg::Tensor a = sg::randn({67, 131}, options, &generator);
    const sg::Tensor b = sg::randn({45, 131}, options, &generator).transpose(0, 1);  // read with a trans flag
    const sg::Tensor batch_a = sg::randn({3, 33, 257}, options, &generator);
    const sg::Tensor batch_b = sg::randn({3, 257, 19}, options, &generator);
    for (const sg::Tensor& product : {sg::matmul(a, b), sg::matmul(batch_a, batch_b)}) {
      const sg::Tensor as_double = product.to(sg::DType::f64).contiguous();
      const double* data = as_double.data_ptr<double>();
      values.insert(values.end(), data, data + as_double.numel());
    }
  }
  std::ofstream(argv[1], std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(double)));
  std::printf("%s\n", sg::cpu::blas_description().c_str());
  return 0;
}
