// torch.nn.init's formulas; the random fills are the kernels of core/kernels/random.h.
#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"

namespace sg::nn::init {

namespace {

Generator& generator_or_default(Generator* generator) {
  return generator != nullptr ? *generator : default_generator();
}

// Writes `fill` into t without recording autograd, and marks t's storage as modified so a graph
// that saved the old values refuses to use them.
template <typename Fill>
Tensor fill_in_place(const Tensor& t, Fill fill) {
  NoGradGuard no_grad;
  fill();
  t.storage()->bump_version();
  return t;
}

void check_floating(const Tensor& t, const char* op_name) {
  SG_CHECK(is_floating(t.dtype()), "init::", op_name, ": expected a floating tensor, got ", t.dtype());
}

int64_t fan(const Tensor& t, FanMode mode) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::fan_in ? fan_in : fan_out;
}

double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode)));
}

double xavier_std(const Tensor& t, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

// The inverse of erf on (-1, 1): Giles' single-precision approximation ("Approximating the
// erfinv function", 2010), then two Newton steps on erf(x) = y, which reach double precision.
double erfinv(double y) {
  if (y <= -1) return -std::numeric_limits<double>::infinity();
  if (y >= 1) return std::numeric_limits<double>::infinity();
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      p = c + p * w;
  }
  double x = p * y;
  for (int step = 0; step < 2; ++step) x -= (std::erf(x) - y) / (2.0 / std::sqrt(std::numbers::pi) * std::exp(-x * x));
  return x;
}

double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)); }

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::conv:
    case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::selu: return 0.75;
  }
  SG_FAIL("init::calculate_gain: unknown nonlinearity");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  SG_CHECK(t.dim() >= 2, "init: fan in and fan out cannot be computed for a tensor with fewer than 2 dims, got shape ",
           shape_str(t.sizes()));
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive_field *= t.size(d);
  return {t.size(1) * receptive_field, t.size(0) * receptive_field};
}

Tensor uniform_(const Tensor& t, double low, double high, Generator* generator) {
  check_floating(t, "uniform_");
  return fill_in_place(t, [&] { kernels::uniform_(t, low, high, generator_or_default(generator)); });
}

Tensor normal_(const Tensor& t, double mean, double std, Generator* generator) {
  check_floating(t, "normal_");
  return fill_in_place(t, [&] { kernels::normal_(t, mean, std, generator_or_default(generator)); });
}

Tensor constant_(const Tensor& t, double value) {
  return fill_in_place(t, [&] { kernels::fill(t, value); });
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0.0); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0); }

Tensor xavier_uniform_(const Tensor& t, double gain, Generator* generator) {
  const double bound = std::sqrt(3.0) * xavier_std(t, gain);
  return uniform_(t, -bound, bound, generator);
}

Tensor xavier_normal_(const Tensor& t, double gain, Generator* generator) {
  return normal_(t, 0.0, xavier_std(t, gain), generator);
}

Tensor kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  if (t.numel() == 0) return t;
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  return uniform_(t, -bound, bound, generator);
}

Tensor kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  if (t.numel() == 0) return t;
  return normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity), generator);
}

Tensor trunc_normal_(const Tensor& t, double mean, double std, double low, double high, Generator* generator) {
  check_floating(t, "trunc_normal_");
  SG_CHECK(std > 0 && low < high, "init::trunc_normal_: expected std > 0 and low < high, got std ", std, ", bounds [",
           low, ", ", high, "]");
  const double cdf_low = normal_cdf((low - mean) / std), cdf_high = normal_cdf((high - mean) / std);
  // Draw u uniformly in [2 cdf_low - 1, 2 cdf_high - 1] (in f64, then the transform on the host);
  // mean + std * sqrt(2) * erfinv(u) is then normal, restricted to [low, high].
  Tensor draws = empty(t.sizes(), {DType::f64});
  kernels::uniform_(draws, 2 * cdf_low - 1, 2 * cdf_high - 1, generator_or_default(generator));
  double* values = draws.data_ptr<double>();
  for (int64_t i = 0; i < draws.numel(); ++i)
    values[i] = std::clamp(mean + std * std::numbers::sqrt2 * erfinv(values[i]), low, high);
  return fill_in_place(t, [&] { kernels::copy(t, draws); });
}

}  // namespace sg::nn::init
