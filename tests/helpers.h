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
// Like rand_input, but a leaf whose memory is not contiguous: the last two dims are stored
// transposed (1-D: every other element of a longer buffer), to exercise the strided paths.
Tensor noncontiguous_input(const Shape& shape, double low = -1.0, double high = 1.0);
// Values of a tensor as f64 in row-major order (any dtype, any strides).
std::vector<double> values(const Tensor& t);
// Max |a - b| over elements; shapes must match.
double max_abs_diff(const Tensor& a, const Tensor& b);

// Sets sg's thread count for one scope and restores the previous count after it.
class NumThreadsGuard {
public:
  explicit NumThreadsGuard(int num_threads) : previous_(get_num_threads()) { set_num_threads(num_threads); }
  ~NumThreadsGuard() { set_num_threads(previous_); }
  NumThreadsGuard(const NumThreadsGuard&) = delete;
  NumThreadsGuard& operator=(const NumThreadsGuard&) = delete;

private:
  int previous_;
};

// Checks every element of `t` (row-major) against `expected` within `tolerance`, naming the element.
void check_close(const Tensor& t, const std::vector<double>& expected, double tolerance);

}  // namespace sg::test

// Lets CHECK(values(t) == std::vector<double>{...}) show both vectors when it fails.
namespace doctest {
template <>
struct StringMaker<std::vector<double>> {
  static String convert(const std::vector<double>& values);
};
}  // namespace doctest

namespace sg {
// Found by argument-dependent lookup, so CHECK and INFO print "f32" rather than doctest's
// default for enums (the underlying number).
inline doctest::String toString(DType dtype) { return dtype_name(dtype); }
}  // namespace sg

// CHECK_GRADCHECK(fn, inputs) fails the test with gradcheck's message.
#define CHECK_GRADCHECK(fn, ...)                           \
  do {                                                     \
    const auto result_ = ::sg::gradcheck(fn, __VA_ARGS__); \
    INFO(result_.message);                                 \
    CHECK(result_.ok);                                     \
  } while (0)
