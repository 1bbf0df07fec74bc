// multinomial: frequencies against the probabilities (chi-square), the no-repeat rule without
// replacement, reproducibility from a seed, and every error.
#include <cmath>
#include <limits>
#include <set>

#include "helpers.h"

using namespace sg;

namespace {

Tensor f64(const std::vector<double>& values, const Shape& shape = {}) { return tensor(values, shape); }

// Upper 0.1% points of the chi-square distribution: a correct sampler exceeds them once in a
// thousand seeds. The seeds here are fixed, so each test passes or fails for good.
constexpr double kChiSquare999[] = {0, 10.83, 13.82, 16.27};  // by degrees of freedom

// Counts of each category among the samples in column `column` of [rows, samples] (all of them
// when column is -1).
std::vector<double> counts(const Tensor& samples, int64_t categories, int64_t column = -1) {
  std::vector<double> result(categories, 0);
  const Tensor picked = column < 0 ? samples : samples.select(1, column);
  for (double s : test::values(picked)) result[static_cast<size_t>(s)] += 1;
  return result;
}

// Pearson's statistic over the categories of positive probability; a category of probability 0
// must never be drawn.
double chi_square(const std::vector<double>& observed, const std::vector<double>& probabilities) {
  double total = 0;
  for (double o : observed) total += o;
  double statistic = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (probabilities[i] == 0) {
      CHECK(observed[i] == 0);
      continue;
    }
    const double expected = total * probabilities[i];
    statistic += (observed[i] - expected) * (observed[i] - expected) / expected;
  }
  return statistic;
}

}  // namespace

TEST_CASE("multinomial with replacement draws each category as often as its probability says") {
  // Row 1 is unnormalised and has a category of weight 0.
  const Tensor probs = f64({0.1, 0.2, 0.3, 0.4, 5, 0, 1, 2}, {2, 4});
  Generator generator(11);
  const Tensor samples = multinomial(probs, 20000, /*replacement=*/true, &generator);
  CHECK(samples.sizes() == Shape{2, 20000});
  CHECK(samples.dtype() == DType::i64);
  CHECK(chi_square(counts(samples.select(0, 0), 4), {0.1, 0.2, 0.3, 0.4}) < kChiSquare999[3]);
  CHECK(chi_square(counts(samples.select(0, 1), 4), {5.0 / 8, 0, 1.0 / 8, 2.0 / 8}) < kChiSquare999[2]);
}

TEST_CASE("multinomial without replacement never repeats a category and draws in proportion, first draw and second") {
  const std::vector<double> p{0.1, 0.2, 0.3, 0.4};
  const int64_t rows = 20000;
  Generator generator(12);
  const Tensor samples = multinomial(f64(p, {1, 4}).expand({rows, 4}), 2, /*replacement=*/false, &generator);
  CHECK(samples.sizes() == Shape{rows, 2});
  const std::vector<double> drawn = test::values(samples);
  int64_t repeats = 0;
  for (int64_t r = 0; r < rows; ++r) repeats += drawn[2 * r] == drawn[2 * r + 1];
  CHECK(repeats == 0);
  // The first draw is categorical(p); the second is j with probability sum over i != j of
  // p_i * p_j / (1 - p_i): draw i first, then j from what is left.
  std::vector<double> second(4, 0);
  for (size_t j = 0; j < 4; ++j)
    for (size_t i = 0; i < 4; ++i)
      if (i != j) second[j] += p[i] * p[j] / (1 - p[i]);
  CHECK(chi_square(counts(samples, 4, 0), p) < kChiSquare999[3]);
  CHECK(chi_square(counts(samples, 4, 1), second) < kChiSquare999[3]);
}

TEST_CASE("multinomial without replacement of every category gives a permutation, skipping none") {
  Generator generator(13);
  const Tensor samples = multinomial(rand({50, 9}, {}, &generator) + 0.01, 9, false, &generator);
  for (int64_t r = 0; r < 50; ++r) {
    const std::vector<double> row = test::values(samples.select(0, r));
    CHECK(std::set<double>(row.begin(), row.end()).size() == 9);
  }
}

TEST_CASE("multinomial never draws a category of probability 0") {
  Generator generator(14);
  const Tensor probs = f64({0, 1e-30, 0, 3, 0}, {5});
  const Tensor with = multinomial(probs, 5000, true, &generator);
  const Tensor without = multinomial(probs.unsqueeze(0).expand({1000, 5}), 2, false, &generator);
  for (const Tensor& samples : {with, without})
    for (double s : test::values(samples)) CHECK((s == 1 || s == 3));
}

TEST_CASE("multinomial of a 1-D input gives [num_samples], f16, bf16 and f32 probabilities work too") {
  Generator generator(15);
  const Tensor samples = multinomial(f64({1, 2, 3}), 2, false, &generator);
  CHECK(samples.sizes() == Shape{2});
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    CAPTURE(dtype);
    const Tensor drawn = multinomial(f64({0, 1, 0, 1}, {2, 2}).to(dtype), 3, true, &generator);
    CHECK(test::values(drawn) == std::vector<double>{1, 1, 1, 1, 1, 1});
  }
}

TEST_CASE("multinomial is reproducible: the same seed gives the same samples, for any thread count") {
  const Tensor probs = rand({64, 300}, {}, &test::rng());
  for (bool replacement : {true, false}) {
    CAPTURE(replacement);
    Generator first(99), second(99);
    Tensor serial, parallel;
    {
      test::NumThreadsGuard one(1);
      serial = multinomial(probs, 40, replacement, &first);
    }
    {
      test::NumThreadsGuard two(2);
      parallel = multinomial(probs, 40, replacement, &second);
    }
    CHECK(test::values(serial) == test::values(parallel));
    // The generator moved on: the next call draws new samples.
    CHECK(test::values(multinomial(probs, 40, replacement, &first)) != test::values(serial));
  }
}

TEST_CASE("multinomial rejects bad probabilities, naming what is wrong") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(multinomial(f64({0.5, -0.25, 0.75}), 1), doctest::Contains("must be non-negative, got -0.25"),
                       Error);
  CHECK_THROWS_WITH_AS(multinomial(f64({0.5, nan}), 1), doctest::Contains("contain NaN"), Error);
  CHECK_THROWS_WITH_AS(multinomial(f64({0.5, inf}), 1, true), doctest::Contains("must be finite, got inf"), Error);
  CHECK_THROWS_WITH_AS(multinomial(f64({1, 2, 0, 0}, {2, 2}), 1, true),
                       doctest::Contains("row 1 of the probabilities sums to 0"), Error);
  CHECK_THROWS_WITH_AS(multinomial(f64({1, 1, 0, 1, 0, 0}, {2, 3}), 2),
                       doctest::Contains("row 1 has a non-zero probability in only 1 of its categories, too few to "
                                         "draw 2 samples without replacement"),
                       Error);
}

TEST_CASE("multinomial rejects impossible requests, naming the sizes") {
  CHECK_THROWS_WITH_AS(multinomial(f64({1, 2, 3}), 4),
                       doctest::Contains("cannot draw num_samples = 4 samples without replacement from 3 categories"),
                       Error);
  CHECK(multinomial(f64({1, 2, 3}), 4, /*replacement=*/true).numel() == 4);
  CHECK_THROWS_WITH_AS(multinomial(f64({1, 2}), 0), doctest::Contains("num_samples must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(multinomial(zeros({2, 2, 2}), 1), doctest::Contains("must be 1-D or 2-D, got shape [2, 2, 2]"),
                       Error);
  CHECK_THROWS_WITH_AS(multinomial(zeros({2, 0}), 1), doctest::Contains("cannot sample from 0 categories"), Error);
  CHECK_THROWS_WITH_AS(multinomial(tensor(std::vector<int64_t>{1, 2}), 1),
                       doctest::Contains("expected floating probabilities, got i64"), Error);
}
