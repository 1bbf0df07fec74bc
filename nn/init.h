#pragma once
// defines: nn::init — the weight initialisations of torch.nn.init (uniform_, normal_, constant_,
//          zeros_, ones_, xavier_*, kaiming_*, trunc_normal_), calculate_gain and the fan sizes.
//
// Each fills the tensor in place, without recording autograd (so it works on parameters), and
// returns it. Random draws come from `generator`, the default one when null.
#include <optional>
#include <utility>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg::nn::init {

enum class Nonlinearity { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };
enum class FanMode { fan_in, fan_out };

// The recommended gain: 1 (linear, conv, sigmoid), 5/3 (tanh), sqrt(2) (relu),
// sqrt(2 / (1 + slope^2)) (leaky_relu; slope = param, 0.01 when absent), 3/4 (selu).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

// For a weight [out, in, k...] (Linear: [out, in]; Conv: [out, in / groups, kH, kW]):
// fan_in = in * prod(k), fan_out = out * prod(k). Needs at least 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor uniform_(const Tensor& t, double low = 0.0, double high = 1.0, Generator* generator = nullptr);
Tensor normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
Tensor constant_(const Tensor& t, double value);
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);

// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); N(0, std) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* generator = nullptr);
Tensor xavier_normal_(const Tensor& t, double gain = 1.0, Generator* generator = nullptr);

// std = calculate_gain(nonlinearity, a) / sqrt(fan), fan chosen by mode; uniform draws from
// U(-sqrt(3) std, sqrt(3) std). `a` is the negative slope of leaky_relu. A tensor with no
// elements is left as it is.
Tensor kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* generator = nullptr);
Tensor kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                       Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* generator = nullptr);

// N(mean, std) restricted to [low, high], drawn by inverting the normal CDF on a uniform draw
// over the CDF's values at the bounds (as PyTorch: exact in distribution, no rejection loop).
Tensor trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double low = -2.0, double high = 2.0,
                     Generator* generator = nullptr);

}  // namespace sg::nn::init
