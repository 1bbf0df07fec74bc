// dtypes: the 16-bit float conversions against an independent reference, promotion, names,
// and conversions between every pair of dtypes through Tensor::to.
#include <cmath>
#include <cstdint>
#include <limits>

#include "helpers.h"

using namespace sg;

namespace {

// An IEEE-style 16-bit format: 1 sign bit, `exponent_bits`, the rest mantissa.
struct Format {
  const char* name;
  int exponent_bits;
  uint16_t (*encode)(float);
  float (*decode)(uint16_t);
};
const Format kHalf{"f16", 5, float_to_half_bits, half_bits_to_float};
const Format kBFloat16{"bf16", 8, float_to_bfloat16_bits, bfloat16_bits_to_float};

// The value of `bits` computed from the format's definition (not from the code under test).
// Infinity is returned as the power of two just past the largest finite value, so that
// "nearest value" searches round overflow exactly as IEEE does.
double reference_value(const Format& format, uint16_t bits) {
  const int mantissa_bits = 15 - format.exponent_bits;
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const int max_exponent = (1 << format.exponent_bits) - 1;
  const int exponent = (bits >> mantissa_bits) & max_exponent;
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == max_exponent) return mantissa ? std::nan("") : sign * std::ldexp(1.0, bias + 1);
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * std::ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits);
}

// reference_value of every pattern, computed once per format.
std::vector<double> reference_table(const Format& format) {
  std::vector<double> table(0x10000);
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) table[bits] = reference_value(format, static_cast<uint16_t>(bits));
  return table;
}

// The correctly rounded encoding of finite `x`: the nearest value of the same sign over all 65536
// patterns, ties going to the even pattern.
uint16_t brute_force_round(const std::vector<double>& table, double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  uint16_t best = sign;
  double best_distance = std::numeric_limits<double>::infinity();
  for (uint32_t magnitude = 0; magnitude < 0x8000; ++magnitude) {
    const auto bits = static_cast<uint16_t>(sign | magnitude);
    if (std::isnan(table[bits])) continue;
    const double distance = std::abs(x - table[bits]);
    if (distance < best_distance || (distance == best_distance && (bits & 1) == 0)) {
      best = bits;
      best_distance = distance;
    }
  }
  return best;
}

float float_from_bits(uint32_t bits) { return detail::bits_float(bits); }

// Inputs that probe rounding: random floats spread over the format's range (including
// subnormals and overflow), exact halfway points between neighbours, and one float ulp either
// side of those halfway points.
std::vector<float> rounding_probes(const Format& format, Generator& generator, int count) {
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  std::vector<float> probes;
  for (int i = 0; i < count; ++i) {
    const Generator::Block block = generator.philox(static_cast<uint64_t>(i));
    // Exponents from below the smallest subnormal to past the largest finite value.
    const int exponent_span = 2 * bias + 16;
    const int exponent = static_cast<int>(block.word[0] % static_cast<uint32_t>(exponent_span)) - bias - 12;
    const float mantissa = 1.0f + uniform_float(block.word[1]);
    const float sign = (block.word[2] & 1) ? -1.0f : 1.0f;
    const float random_value = sign * std::ldexp(mantissa, exponent);
    if (std::isfinite(random_value)) probes.push_back(random_value);
    // Halfway between a random finite pattern and the next one up in magnitude.
    const auto low = static_cast<uint16_t>(block.word[3] & 0x7FFF);
    const double a = reference_value(format, low), b = reference_value(format, static_cast<uint16_t>(low + 1));
    if (std::isnan(a) || std::isnan(b)) continue;
    const auto halfway = static_cast<float>((a + b) / 2);  // exact: float has spare bits
    if (!std::isfinite(halfway)) continue;
    probes.push_back(sign * halfway);
    probes.push_back(sign * std::nextafter(halfway, 0.0f));
    probes.push_back(sign * std::nextafter(halfway, INFINITY));
  }
  return probes;
}

void check_round_trips(const Format& format) {
  int failures = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto pattern = static_cast<uint16_t>(bits);
    const float value = format.decode(pattern);
    const double expected = reference_value(format, pattern);
    const bool is_inf = (pattern & 0x7FFF) == (0x7FFF ^ ((1 << (15 - format.exponent_bits)) - 1));
    if (std::isnan(expected)) {
      failures += !std::isnan(value) || !std::isnan(format.decode(format.encode(value)));
    } else {
      failures += is_inf ? !(std::isinf(value) && std::signbit(value) == std::signbit(expected))
                         : static_cast<double>(value) != expected;
      failures += format.encode(value) != pattern;
    }
  }
  INFO(format.name);
  CHECK(failures == 0);
}

void check_rounding_against_brute_force(const Format& format, uint64_t seed) {
  Generator generator(seed);
  const std::vector<double> table = reference_table(format);
  int mismatches = 0;
  for (float x : rounding_probes(format, generator, 1000)) {
    const uint16_t got = format.encode(x), expected = brute_force_round(table, x);
    if (got != expected) {
      if (++mismatches <= 5) MESSAGE(format.name, ": ", x, " encoded as ", got, ", expected ", expected);
    }
  }
  INFO(format.name);
  CHECK(mismatches == 0);
}

Tensor f64_values(const std::vector<double>& values) { return tensor(values); }

// The 16-bit patterns of a f16 or bf16 tensor.
std::vector<uint16_t> bits_of(const Tensor& t) {
  std::vector<uint16_t> bits;
  const Tensor c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i)
    bits.push_back(c.dtype() == DType::f16 ? c.data_ptr<Half>()[i].bits : c.data_ptr<BFloat16>()[i].bits);
  return bits;
}

const DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                            DType::i64, DType::i32, DType::u8,  DType::boolean};

}  // namespace

TEST_CASE("16-bit float to float to 16-bit float is the identity for every bit pattern") {
  check_round_trips(kHalf);
  check_round_trips(kBFloat16);
}

TEST_CASE("float to 16-bit float rounds to nearest, ties to even, as a brute-force search finds") {
  check_rounding_against_brute_force(kHalf, 11);
  check_rounding_against_brute_force(kBFloat16, 12);
}

TEST_CASE("f16 rounding: exact ties go to even") {
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // 1 + ulp/2 -> 1
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // 1 + 3ulp/2 -> 1 + 2ulp
  CHECK(float_to_half_bits(-(1.0f + std::ldexp(1.0f, -11))) == 0xBC00);
  CHECK(float_to_half_bits(2049.0f) == 0x6800);  // 2048 (even) rather than 2050
  CHECK(float_to_half_bits(2051.0f) == 0x6802);  // 2052 (even) rather than 2050
}

TEST_CASE("bf16 rounding: exact ties go to even") {
  CHECK(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);
  CHECK(float_to_bfloat16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK(float_to_bfloat16_bits(-(1.0f + 3 * std::ldexp(1.0f, -8))) == 0xBF82);
  CHECK(float_to_bfloat16_bits(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)) == 0x3F81);
}

TEST_CASE("f16 overflows to inf from 65520 on and keeps 65504 below it") {
  CHECK(float_to_half_bits(65504.0f) == 0x7BFF);
  CHECK(float_to_half_bits(65519.0f) == 0x7BFF);
  CHECK(float_to_half_bits(65520.0f) == 0x7C00);  // the tie rounds to even, which is inf
  CHECK(float_to_half_bits(-65520.0f) == 0xFC00);
  CHECK(float_to_half_bits(1e6f) == 0x7C00);
  CHECK(float_to_half_bits(INFINITY) == 0x7C00);
  CHECK(float_to_half_bits(-INFINITY) == 0xFC00);
}

TEST_CASE("bf16 rounds to inf from the tie below 2^128 on") {
  CHECK(float_to_bfloat16_bits(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  CHECK(float_to_bfloat16_bits(float_from_bits(0x7F7F7FFF)) == 0x7F7F);        // just below the tie
  CHECK(float_to_bfloat16_bits(INFINITY) == 0x7F80);
}

TEST_CASE("f16 subnormals round correctly at the bottom of the range") {
  CHECK(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);      // halfway to 0: ties to even
  CHECK(float_to_half_bits(3 * std::ldexp(1.0f, -26)) == 0x0001);  // 0.75 of the smallest: rounds up
  CHECK(float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(float_to_half_bits(3 * std::ldexp(1.0f, -25)) == 0x0002);  // 1.5 x smallest: tie to even (2)
  CHECK(float_to_half_bits(std::ldexp(1.0f, -14)) == 0x0400);      // smallest normal
  CHECK(float_to_half_bits(std::ldexp(1023.5f, -24)) == 0x0400);   // tie between subnormal max and normal min
  CHECK(float_to_half_bits(-std::ldexp(1.0f, -24)) == 0x8001);
  CHECK(float_to_half_bits(1e-30f) == 0x0000);
}

TEST_CASE("negative zero keeps its sign in both 16-bit formats") {
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
  CHECK(std::signbit(half_bits_to_float(0x8000)));
  CHECK(float_to_bfloat16_bits(-0.0f) == 0x8000);
  CHECK(std::signbit(bfloat16_bits_to_float(0x8000)));
  CHECK(float_to_half_bits(-1e-30f) == 0x8000);  // underflow keeps the sign
}

TEST_CASE("NaN stays NaN in both 16-bit formats, including signalling payloads") {
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(float_from_bits(0x7F800001)))));
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(NAN))));
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(float_from_bits(0x7F800001)))));
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(float_from_bits(0xFFFFFFFF)))));
}

TEST_CASE("promote_types follows PyTorch's table") {
  using D = DType;
  // Row dtype promoted with column dtype, in kAllDTypes order: f32 f64 f16 bf16 i64 i32 u8 bool.
  const D table[8][8] = {
      {D::f32, D::f64, D::f32, D::f32, D::f32, D::f32, D::f32, D::f32},
      {D::f64, D::f64, D::f64, D::f64, D::f64, D::f64, D::f64, D::f64},
      {D::f32, D::f64, D::f16, D::f32, D::f16, D::f16, D::f16, D::f16},
      {D::f32, D::f64, D::f32, D::bf16, D::bf16, D::bf16, D::bf16, D::bf16},
      {D::f32, D::f64, D::f16, D::bf16, D::i64, D::i64, D::i64, D::i64},
      {D::f32, D::f64, D::f16, D::bf16, D::i64, D::i32, D::i32, D::i32},
      {D::f32, D::f64, D::f16, D::bf16, D::i64, D::i32, D::u8, D::u8},
      {D::f32, D::f64, D::f16, D::bf16, D::i64, D::i32, D::u8, D::boolean},
  };
  for (int row = 0; row < 8; ++row)
    for (int column = 0; column < 8; ++column) {
      INFO(kAllDTypes[row], " with ", kAllDTypes[column]);
      CHECK(promote_types(kAllDTypes[row], kAllDTypes[column]) == table[row][column]);
    }
}

TEST_CASE("itemsize, names and categories of every dtype") {
  const size_t sizes[] = {4, 8, 2, 2, 8, 4, 1, 1};
  const std::string names[] = {"f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"};
  const bool floating[] = {true, true, true, true, false, false, false, false};
  for (int i = 0; i < 8; ++i) {
    const DType dtype = kAllDTypes[i];
    CHECK(itemsize(dtype) == sizes[i]);
    CHECK(dtype_name(dtype) == names[i]);
    CHECK(is_floating(dtype) == floating[i]);
    CHECK(is_integral(dtype) == !floating[i]);
    std::ostringstream out;
    out << dtype;
    CHECK(out.str() == names[i]);
    CHECK(zeros({3}, {dtype}).element_size() == sizes[i]);
  }
}

TEST_CASE("values every dtype holds survive a conversion to any dtype and back") {
  const Tensor source = f64_values({0, 1, 2, 3, 100});
  for (DType from : kAllDTypes) {
    if (from == DType::boolean) continue;
    const Tensor typed = source.to(from);
    for (DType to : kAllDTypes) {
      if (to == DType::boolean) continue;
      INFO(from, " -> ", to);
      CHECK(test::values(typed.to(to).to(from)) == test::values(source));
      CHECK(typed.to(to).dtype() == to);
    }
  }
}

TEST_CASE("conversion to bool is nonzero, and bool converts to 0 and 1") {
  for (DType from : kAllDTypes) {
    if (from == DType::boolean) continue;
    INFO(from);
    const Tensor as_bool = f64_values({0, 1, 2, 0, 100}).to(from).to(DType::boolean);
    CHECK(as_bool.dtype() == DType::boolean);
    CHECK(test::values(as_bool) == std::vector<double>{0, 1, 1, 0, 1});
    CHECK(test::values(as_bool.to(from)) == std::vector<double>{0, 1, 1, 0, 1});
  }
  // Fractions and NaN are nonzero too, as bool(0.5) and bool(nan) in Python.
  CHECK(test::values(f64_values({0.5, -0.25, NAN, -0.0}).to(DType::boolean)) == std::vector<double>{1, 1, 1, 0});
}

TEST_CASE("float to integer conversion truncates towards zero") {
  const Tensor x = f64_values({-2.7, -0.5, 0.5, 2.7, 254.9});
  CHECK(test::values(x.to(DType::i64)) == std::vector<double>{-2, 0, 0, 2, 254});
  CHECK(test::values(x.to(DType::i32)) == std::vector<double>{-2, 0, 0, 2, 254});
  CHECK(test::values(x.to(DType::f32).to(DType::i64)) == std::vector<double>{-2, 0, 0, 2, 254});
  CHECK(test::values(x.to(DType::f16).to(DType::i32)) == std::vector<double>{-2, 0, 0, 2, 254});
  CHECK(test::values(f64_values({0.9, 254.9}).to(DType::u8)) == std::vector<double>{0, 254});
}

TEST_CASE("conversions to narrower floats round once, to nearest even") {
  // Just above the halfway point between 1 and the next f16 (bf16): a conversion through f32
  // would lose the 2^-40 and then round the tie down to 1.
  const double above_f16_tie = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const double above_bf16_tie = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(test::values(f64_values({above_f16_tie}).to(DType::f16)) == std::vector<double>{1 + std::ldexp(1.0, -10)});
  CHECK(test::values(f64_values({above_bf16_tie}).to(DType::bf16)) == std::vector<double>{1 + std::ldexp(1.0, -7)});
  // The same holds from integers wider than f32's significand: 2^24 + 2^16 + 1 lies just above
  // the bf16 tie at 2^24 + 2^16, so it rounds up to 2^24 + 2^17.
  const int64_t wide = (int64_t{1} << 24) + (1 << 16) + 1;
  const double expected = std::ldexp(1.0, 24) + std::ldexp(1.0, 17);
  CHECK(test::values(tensor(std::vector<int64_t>{wide}).to(DType::bf16)) == std::vector<double>{expected});
  CHECK(test::values(tensor(std::vector<int32_t>{static_cast<int32_t>(wide)}).to(DType::bf16)) ==
        std::vector<double>{expected});
  // Exactly representable f64 values, ties and overflow behave as for f32 input.
  CHECK(test::values(f64_values({65519, 65520, 1 + std::ldexp(1.0, -11), -0.0}).to(DType::f16)) ==
        std::vector<double>{65504, INFINITY, 1, 0});
  CHECK(std::signbit(test::values(f64_values({-0.0}).to(DType::f16))[0]));
  CHECK(std::isnan(test::values(f64_values({NAN}).to(DType::bf16))[0]));
  CHECK(test::values(f64_values({1e300, -1e300}).to(DType::bf16)) == std::vector<double>{INFINITY, -INFINITY});
  CHECK(test::values(f64_values({1e-300}).to(DType::f16)) == std::vector<double>{0});
}

TEST_CASE("f64 to 16-bit conversion rounds once, as a brute-force search finds") {
  // Doubles a hair (2^-30 relative) either side of halfway points, where rounding through f32
  // first would land exactly on the tie, plus the halfway points themselves.
  for (const Format& format : {kHalf, kBFloat16}) {
    INFO(format.name);
    Generator generator(14);
    const std::vector<double> table = reference_table(format);
    std::vector<double> probes;
    for (float halfway : rounding_probes(format, generator, 300)) {
      probes.push_back(halfway);
      probes.push_back(static_cast<double>(halfway) * (1 + std::ldexp(1.0, -30)));
      probes.push_back(static_cast<double>(halfway) * (1 - std::ldexp(1.0, -30)));
    }
    const auto got = bits_of(tensor(probes).to(format.exponent_bits == 5 ? DType::f16 : DType::bf16));
    int mismatches = 0;
    for (size_t i = 0; i < probes.size(); ++i) mismatches += got[i] != brute_force_round(table, probes[i]);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("integer to float conversion is exact where the float can hold the value") {
  const int64_t big = (int64_t{1} << 40) + 1;
  CHECK(test::values(tensor(std::vector<int64_t>{big, -7}).to(DType::f64)) ==
        std::vector<double>{static_cast<double>(big), -7});
  // f32 keeps 24 bits: 2^24 + 1 is a tie and rounds to the even 2^24.
  CHECK(test::values(tensor(std::vector<int64_t>{(1 << 24) + 1}).to(DType::f32)) ==
        std::vector<double>{std::ldexp(1.0, 24)});
}

TEST_CASE("to() of the same dtype returns the tensor itself") {
  const Tensor x = zeros({2});
  CHECK(x.to(DType::f32).is_same(x));
  CHECK_FALSE(x.to(DType::f64).is_same(x));
}
