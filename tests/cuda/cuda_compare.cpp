#include "cuda_compare.h"

#include <cmath>

#include "helpers.h"

namespace sg::test {

double tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    case DType::f16: return 2e-3;     // 2 units of the last place (2^-10)
    case DType::bf16: return 1.6e-2;  // 2 units of the last place (2^-7)
    default: return 0;
  }
}

void check_matches_cpu(const Tensor& gpu_result, const Tensor& cpu_result, double tolerance) {
  REQUIRE(gpu_result.device().is_cuda());
  REQUIRE(cpu_result.device().is_cpu());
  REQUIRE(gpu_result.dtype() == cpu_result.dtype());
  REQUIRE(gpu_result.sizes() == cpu_result.sizes());
  if (tolerance < 0) tolerance = tolerance_for(cpu_result.dtype());
  const std::vector<double> got = values(gpu_result.to(Device::cpu())), want = values(cpu_result);
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      CHECK_MESSAGE(std::isnan(got[i]), "element ", i, ": GPU ", got[i], ", CPU NaN");
      continue;
    }
    if (got[i] == want[i]) continue;  // also a matching inf, where the difference is NaN
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tolerance * (std::abs(want[i]) + 1), "element ", i, ": GPU ", got[i],
                  ", CPU ", want[i]);
  }
}

}  // namespace sg::test
