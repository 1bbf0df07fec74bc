// The branch-free float exp and erf of core/simd_math.h against the C library's double functions,
// over dense sweeps of the floats (their largest error in ulps) and at their special values.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/simd_math.h"
#include "helpers.h"

using namespace sg;

namespace {

float float_of_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// The error of `got` in units of the last place of the float nearest `exact`: the smaller of the
// gaps to its neighbours, so a value just below a power of two is not measured in the larger ulp above.
double ulps(float got, double exact) {
  const float nearest = std::abs(static_cast<float>(exact));
  const double below = nearest - std::nextafter(nearest, 0.0f);
  const double above = std::nextafter(nearest, std::numeric_limits<float>::infinity()) - nearest;
  const double ulp = below > 0 ? std::min(below, above) : above;
  return std::abs(static_cast<double>(got) - exact) / ulp;
}

// Every `step`-th float from `low` to `high` (both >= 0), and their negatives if `both_signs`.
std::vector<float> sweep(float low, float high, uint32_t step, bool both_signs) {
  std::vector<float> xs;
  for (uint32_t bits = bits_of(low); bits <= bits_of(high); bits += step) {
    xs.push_back(float_of_bits(bits));
    if (both_signs) xs.push_back(-float_of_bits(bits));
  }
  return xs;
}

// The largest error of f over xs against the double function, each computed in a plain loop over
// an array, as the kernels call them (so that the compiler vectorises it). Names the worst x.
template <typename F, typename Exact>
double max_ulps(const std::vector<float>& xs, F f, Exact exact) {
  std::vector<float> got(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) got[i] = f(xs[i]);
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double error = ulps(got[i], exact(static_cast<double>(xs[i])));
    if (error > worst) {
      worst = error;
      worst_at = i;
    }
  }
  MESSAGE("largest error ", worst, " ulp over ", xs.size(), " floats, at x = ", xs[worst_at], " (got ", got[worst_at],
          ", exactly ", exact(static_cast<double>(xs[worst_at])), ")");
  return worst;
}

}  // namespace

TEST_CASE("erf_f32 is within 1.5 ulp of erf across the floats, densest where its two formulas meet") {
  // Every 997th float from the smallest normal to 6 (erf is 1 in float from 3.92 on), both signs;
  // every float within 2^16 of the switch between the formulas at 0.921875 and of the clamp at 4.
  std::vector<float> xs = sweep(std::numeric_limits<float>::min(), 6.0f, 997, true);
  for (float edge : {0.921875f, 4.0f}) {
    const auto near_edge = sweep(float_of_bits(bits_of(edge) - 65536), float_of_bits(bits_of(edge) + 65536), 1, true);
    xs.insert(xs.end(), near_edge.begin(), near_edge.end());
  }
  // 1.1 ulp over every float in [1e-6, 6] (measured when the coefficients were fitted).
  const double worst = max_ulps(
      xs, [](float x) { return math::erf_f32(x); }, [](double x) { return std::erf(x); });
  CHECK(worst <= 1.5);
}

TEST_CASE("exp_f32 is within 1.5 ulp of exp from -87.3 to 88.3") {
  auto exp_f32 = [](float x) { return math::exp_f32(x); };
  auto exact = [](double x) { return std::exp(x); };
  const std::vector<float> xs = sweep(0.0f, 87.3f, 997, true);
  const double worst = max_ulps(xs, exp_f32, exact);
  // 1.0 ulp over every float in [-87.3, 88.3] (measured when the header was written).
  CHECK(worst <= 1.5);
  const std::vector<float> high = sweep(87.3f, 88.3f, 1, false);
  CHECK(max_ulps(high, exp_f32, exact) <= 1.5);
}

TEST_CASE("erf_f32 and exp_f32 are exact at their special values") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(math::erf_f32(0.0f) == 0.0f);
  CHECK(std::signbit(math::erf_f32(-0.0f)));
  CHECK(math::erf_f32(inf) == 1.0f);
  CHECK(math::erf_f32(-inf) == -1.0f);
  CHECK(math::erf_f32(4.5f) == 1.0f);
  CHECK(math::erf_f32(-100.0f) == -1.0f);
  CHECK(std::isnan(math::erf_f32(nan)));
  CHECK(math::erf_f32(1e-30f) == static_cast<float>(std::erf(1e-30)));
  for (float x : {0.3f, 0.921875f, 1.7f, 3.5f}) CHECK(math::erf_f32(-x) == -math::erf_f32(x));  // odd

  CHECK(math::exp_f32(0.0f) == 1.0f);
  CHECK(math::exp_f32(-inf) == 0.0f);  // a masked attention score
  CHECK(math::exp_f32(-87.5f) == 0.0f);
  CHECK(math::exp_f32(-1000.0f) == 0.0f);
  CHECK(math::exp_f32(89.0f) == inf);
  CHECK(math::exp_f32(inf) == inf);
  CHECK(std::isnan(math::exp_f32(nan)));
}

TEST_CASE("exp_of and erf_of use the branch-free functions for floats and the C library for doubles") {
  CHECK(math::erf_of(0.5f) == math::erf_f32(0.5f));
  CHECK(math::exp_of(-2.5f) == math::exp_f32(-2.5f));
  CHECK(math::erf_of(0.5) == std::erf(0.5));
  CHECK(math::exp_of(-2.5) == std::exp(-2.5));
}
