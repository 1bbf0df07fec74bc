#include "helpers.h"

#include <algorithm>
#include <cmath>

namespace sg::test {

Generator& rng() {
  static Generator generator(20261122);
  return generator;
}

Tensor rand_input(const Shape& shape, double low, double high) {
  Tensor t = rand(shape, {DType::f64}, &rng());
  {
    NoGradGuard no_grad;
    t = t * (high - low) + low;
  }
  return t.requires_grad_();
}

std::vector<double> values(const Tensor& t) {
  Tensor flat = t.detach().to(DType::f64).contiguous();
  const double* data = flat.data_ptr<double>();
  return std::vector<double>(data, data + flat.numel());
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  const auto va = values(a), vb = values(b);
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  return worst;
}

}  // namespace sg::test
