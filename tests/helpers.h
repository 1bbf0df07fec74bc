#pragma once
// defines: test helpers — seeded random inputs, element-wise comparison, gradcheck assertion.
#include <doctest/doctest.h>

#include <vector>

#include "syncgrad.h"

namespace sg::test {

// A fresh generator per test, so every test's inputs are fixed by its own seed.
Generator& rng();
// f64 randn of `shape`, requiring grad (the usual gradcheck input).
Tensor rand_input(const Shape& shape, double low = -1.0, double high = 1.0);
// Values of a tensor as f64 in row-major order (any dtype, any strides).
std::vector<double> values(const Tensor& t);
// Max |a - b| over elements; shapes must match.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace sg::test

// CHECK_GRADCHECK(fn, inputs) fails the test with gradcheck's message.
#define CHECK_GRADCHECK(fn, ...)                                      \
  do {                                                                \
    const auto result_ = ::sg::gradcheck(fn, __VA_ARGS__);            \
    INFO(result_.message);                                            \
    CHECK(result_.ok);                                                \
  } while (0)
