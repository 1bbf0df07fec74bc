#include "helpers.h"

#include <algorithm>
#include <cmath>
#include <sstream>

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

Tensor noncontiguous_input(const Shape& shape, double low, double high) {
  Tensor t;
  {
    NoGradGuard no_grad;
    if (shape.size() < 2) {
      const int64_t n = shape.empty() ? 1 : shape[0];
      t = rand_input({2 * n}, low, high).detach().slice(0, 0, 2 * n, 2).reshape(shape);
    } else {
      Shape swapped = shape;
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      t = rand_input(swapped, low, high).detach().transpose(-1, -2);
    }
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

void check_close(const Tensor& t, const std::vector<double>& expected, double tolerance) {
  const std::vector<double> actual = test::values(t);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element ", i, ": got ", actual[i], ", expected ", expected[i]);
    CHECK(std::abs(actual[i] - expected[i]) <= tolerance);
  }
}

}  // namespace sg::test

doctest::String doctest::StringMaker<std::vector<double>>::convert(const std::vector<double>& values) {
  std::ostringstream out;
  out.precision(17);
  out << '{';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << '}';
  return out.str().c_str();
}
