// Factories (zeros, arange, linspace, rand, tensor, from_blob, *_like) and the Philox Generator.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/cpu/philox_batch.h"
#include "core/kernels/random.h"
#include "helpers.h"

using namespace sg;

namespace {

const DType kFloatingDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// The significand bits of a floating dtype (f64's 53 for the others): uniform_ keeps that many
// bits of each draw.
int significand_bits(DType dtype) {
  switch (dtype) {
    case DType::f32: return 24;
    case DType::f16: return 11;
    case DType::bf16: return 8;
    default: return 53;
  }
}

// The values a fill of `dtype` must hold: element i is math::draw of half i % 2 of Philox block
// first + i / 2, converted as the kernels convert (double -> compute type -> dtype), one element
// at a time — the definition in core/kernels/random.h, with nothing batched.
std::vector<double> draws_by_definition(DType dtype, int64_t n, uint64_t seed, uint64_t first, const RandomDraw& draw) {
  std::vector<double> expected(n);
  SG_DISPATCH_ALL(dtype, "draws_by_definition", [&]<typename scalar_t>() {
    for (int64_t i = 0; i < n; ++i) {
      const PhiloxBlock block = philox4x32_10(seed, first + static_cast<uint64_t>(i / 2));
      const auto value = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(math::draw(draw, int(i % 2), block)));
      expected[i] = static_cast<double>(static_cast<opmath_t<scalar_t>>(value));
    }
  });
  return expected;
}

double mean_of(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double mean = mean_of(v);
  double total = 0;
  for (double x : v) total += (x - mean) * (x - mean);
  return std::sqrt(total / static_cast<double>(v.size()));
}

}  // namespace

// ---- deterministic factories ----

TEST_CASE("shapes whose element count, strides or bytes overflow int64 are errors naming the shape") {
  const int64_t big = (int64_t{1} << 32) - 1;
  // No elements, yet the outer stride would be (2^32 - 1)^2 > 2^63 - 1.
  CHECK(numel_of({0, big, big}) == 0);
  CHECK(!fits_int64_indexing({0, big, big}));
  CHECK(fits_int64_indexing({0, big}));
  CHECK_THROWS_WITH_AS(contiguous_strides({0, big, big}),
                       doctest::Contains("the shape [0, 4294967295, 4294967295] needs strides above 2^63 - 1"), Error);
  CHECK_THROWS_WITH_AS(empty({0, big, big}), doctest::Contains("[0, 4294967295, 4294967295]"), Error);
  CHECK_THROWS_WITH_AS(numel_of({big, big, big}), doctest::Contains("has more than 2^63 - 1 elements"), Error);
  // 2^61 elements fit, their 2^64 bytes do not.
  CHECK_THROWS_WITH_AS(empty({int64_t{1} << 61}, {DType::f64}), doctest::Contains("needs more than 2^63 - 1 bytes"),
                       Error);
}

TEST_CASE("zeros, ones and full have the requested shape, dtype and value") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8}) {
    INFO(dtype);
    const Tensor z = zeros({2, 3}, {dtype}), o = ones({2, 3}, {dtype}), f = full({4}, 7, {dtype});
    CHECK(z.sizes() == Shape{2, 3});
    CHECK(z.dtype() == dtype);
    CHECK(z.is_contiguous());
    CHECK(test::values(z) == std::vector<double>(6, 0.0));
    CHECK(test::values(o) == std::vector<double>(6, 1.0));
    CHECK(test::values(f) == std::vector<double>(4, 7.0));
  }
  CHECK(test::values(full({3}, 2.5, {DType::boolean})) == std::vector<double>(3, 1.0));  // nonzero is true
  CHECK(test::values(full({2}, -2.75, {DType::i32})) == std::vector<double>(2, -2.0));   // truncated
  CHECK(zeros({0, 4}).numel() == 0);
  CHECK_THROWS_WITH_AS(zeros({2, -1}), "empty: negative size in shape [2, -1]", Error);
}

TEST_CASE("scalar_tensor makes a 0-dim tensor") {
  const Tensor s = scalar_tensor(4.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item() == 4.5);
  CHECK(scalar_tensor(3, {DType::i64}).item<int64_t>() == 3);
}

TEST_CASE("arange counts from start towards end by step, end excluded") {
  CHECK(test::values(arange(5)) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(arange(5).dtype() == DType::i64);
  CHECK(test::values(arange(2, 8, 2)) == std::vector<double>{2, 4, 6});
  CHECK(test::values(arange(2, 9, 2)) == std::vector<double>{2, 4, 6, 8});
  CHECK(test::values(arange(5, 0, -1.5, {DType::f32})) == std::vector<double>{5, 3.5, 2, 0.5});
  CHECK(test::values(arange(0, 1, 0.25, {DType::f64})) == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(arange(0, 1, 0.1, {DType::f64}).numel() == 10);  // as torch.arange(0, 1, 0.1)
  CHECK(test::values(arange(-3, -1)) == std::vector<double>{-3, -2});
  CHECK(arange(3, 3).numel() == 0);
  CHECK(arange(4, {DType::f16}).dtype() == DType::f16);
  CHECK_THROWS_WITH_AS(arange(0, 5, 0), "arange: step must be nonzero", Error);
  CHECK_THROWS_WITH_AS(arange(0, 5, -1), "arange: the range [0, 5) with step -1 goes the wrong way", Error);
}

TEST_CASE("linspace hits both endpoints exactly and spaces the rest evenly") {
  const Tensor t = linspace(-1, 1, 7, {DType::f64});
  const auto v = test::values(t);
  REQUIRE(v.size() == 7);
  CHECK(v.front() == -1.0);
  CHECK(v.back() == 1.0);
  for (int i = 0; i < 7; ++i) CHECK(v[i] == doctest::Approx(-1 + i / 3.0).epsilon(1e-15));
  // In f32 the endpoints are the floats nearest to them.
  const auto f = test::values(linspace(0.1, 0.7, 5));
  CHECK(f.front() == static_cast<double>(0.1f));
  CHECK(f.back() == static_cast<double>(0.7f));
  CHECK(test::values(linspace(0, 10, 2)) == std::vector<double>{0, 10});
  CHECK(test::values(linspace(3, 5, 1)) == std::vector<double>{3});  // one step is the start, as in PyTorch
  CHECK(linspace(3, 5, 0).numel() == 0);
  CHECK_THROWS_WITH_AS(linspace(0, 1, -2), "linspace: steps must be non-negative, got -2", Error);
}

TEST_CASE("tensor(values) copies the values, 1-D by default, in the dtype of the element type") {
  CHECK(tensor(std::vector<float>{1, 2}).dtype() == DType::f32);
  CHECK(tensor(std::vector<double>{1, 2}).dtype() == DType::f64);
  CHECK(tensor(std::vector<int64_t>{1, 2}).dtype() == DType::i64);
  CHECK(tensor(std::vector<int32_t>{1, 2}).dtype() == DType::i32);
  CHECK(tensor(std::vector<uint8_t>{1, 2}).dtype() == DType::u8);
  CHECK(tensor(std::vector<bool>{true, false}).dtype() == DType::boolean);
  CHECK(tensor(std::vector<Half>{Half(1.f)}).dtype() == DType::f16);
  CHECK(tensor(std::vector<BFloat16>{BFloat16(1.f)}).dtype() == DType::bf16);
  CHECK(tensor(std::vector<double>{5}).sizes() == Shape{1});  // as torch.tensor([5.]), never 0-dim
  CHECK(tensor(std::vector<double>{}).sizes() == Shape{0});
  const Tensor m = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(m.sizes() == Shape{2, 3});
  CHECK(m[1][0].item<int64_t>() == 4);
  CHECK(test::values(tensor(std::vector<bool>{true, false, true})) == std::vector<double>{1, 0, 1});
  CHECK_THROWS_WITH_AS(tensor(std::vector<double>{1, 2, 3}, {2, 2}), "tensor: 3 values do not fill shape [2, 2]",
                       Error);
}

TEST_CASE("constants whose upper words are zero reach memory intact") {
  // GCC 12 with -march=native on AVX-512 machines built these as a broadcast of the first word
  // ({1, 1, 1, 1}); CMakeLists.txt turns the responsible tuning off. Each goes through memory
  // into a tensor, so the check reads what the compiled code stored.
  const Tensor a = tensor(std::vector<double>{1, 1, 1, 0});
  CHECK(a[3].item() == 0.0);
  const Tensor b = tensor(std::vector<int64_t>{5, 5, 0, 0});
  CHECK(b[2].item<int64_t>() == 0);
  const Tensor c = tensor(std::vector<double>{3, 3, 3, 3, 0, 0, 0, 0});
  CHECK(c[7].item() == 0.0);
}

TEST_CASE("from_blob wraps caller memory without copying, with custom strides") {
  std::vector<float> buffer{0, 1, 2, 3, 4, 5};
  Tensor t = from_blob(buffer.data(), {2, 3}, DType::f32);
  CHECK(t.data_ptr<float>() == buffer.data());
  t.fill_(9);
  CHECK(buffer[5] == 9.0f);
  buffer = {0, 1, 2, 3, 4, 5};
  const Tensor columns = from_blob(buffer.data(), {3, 2}, DType::f32, {}, {1, 3});  // the transpose
  CHECK(test::values(columns) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK_FALSE(columns.is_contiguous());
}

TEST_CASE("from_blob's deleter runs exactly once, when the last view is gone") {
  int calls = 0;
  void* freed = nullptr;
  auto* data = new double[4]{1, 2, 3, 4};
  Tensor view;
  {
    Tensor t = from_blob(data, {4}, DType::f64, [&](void* p) {
      ++calls;
      freed = p;
      delete[] static_cast<double*>(p);
    });
    view = t.slice(0, 1, 3);
    Tensor copy = t;
  }
  CHECK(calls == 0);
  CHECK(test::values(view) == std::vector<double>{2, 3});
  view = Tensor();
  CHECK(calls == 1);
  CHECK(freed == data);
}

TEST_CASE("the _like factories copy shape and dtype") {
  const Tensor x = zeros({2, 5}, {DType::f16});
  for (const Tensor& t : {empty_like(x), zeros_like(x), ones_like(x), full_like(x, 3), rand_like(x), randn_like(x)}) {
    CHECK(t.sizes() == x.sizes());
    CHECK(t.dtype() == DType::f16);
    CHECK(t.device() == x.device());
    CHECK_FALSE(t.is_same(x));
  }
  CHECK(test::values(ones_like(x)) == std::vector<double>(10, 1.0));
  CHECK(test::values(full_like(x, 3)) == std::vector<double>(10, 3.0));
  // The like-factories of a non-contiguous tensor are contiguous.
  CHECK(zeros_like(zeros({3, 4}).t()).is_contiguous());
}

// ---- random factories ----

TEST_CASE("rand lies in 0 <= x < 1 for every floating dtype, with mean 1/2 and variance 1/12") {
  for (DType dtype : kFloatingDTypes) {
    INFO(dtype);
    Generator generator(7);
    const auto v = test::values(rand({100000}, {dtype}, &generator));
    CHECK(*std::min_element(v.begin(), v.end()) >= 0.0);
    CHECK(*std::max_element(v.begin(), v.end()) < 1.0);  // bf16 keeps 8 bits: a draw near 1 must not round up
    // Standard error of the mean of 1e5 uniforms is 0.29 / sqrt(1e5) = 0.0009; 0.005 is over 5
    // of them plus the bf16 grid's bias (draws are multiples of 2^-8 rounded down: -0.002).
    CHECK(std::abs(mean_of(v) - 0.5) < 0.005);
    CHECK(std_of(v) * std_of(v) == doctest::Approx(1.0 / 12).epsilon(0.02));  // 2%: ~6 standard errors
  }
}

TEST_CASE("randn has mean 0 and standard deviation 1 over 100k samples") {
  for (DType dtype : kFloatingDTypes) {
    INFO(dtype);
    Generator generator(8);
    const auto v = test::values(randn({100000}, {dtype}, &generator));
    // Standard errors over 1e5 samples: mean 1/sqrt(1e5) = 0.0032, std 1/sqrt(2e5) = 0.0022;
    // the tolerances are 5 of them.
    CHECK(std::abs(mean_of(v)) < 0.016);
    CHECK(std::abs(std_of(v) - 1.0) < 0.011);
    // About 68.27% within one standard deviation (standard error 0.0015; tolerance 5 of them).
    const auto inside = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) < 1.0; });
    CHECK(static_cast<double>(inside) / 1e5 == doctest::Approx(0.6827).epsilon(0.011));
  }
}

TEST_CASE("randint draws every integer from low to high - 1 and nothing outside") {
  Generator generator(9);
  const Tensor t = randint(-3, 4, {10000}, {DType::i64}, &generator);
  CHECK(t.dtype() == DType::i64);
  const auto v = test::values(t);
  const std::set<double> seen(v.begin(), v.end());
  CHECK(seen == std::set<double>{-3, -2, -1, 0, 1, 2, 3});
  // Each of the 7 values should come up 10000/7 = 1429 times (standard deviation 35).
  for (double value : seen) CHECK(std::abs(std::count(v.begin(), v.end(), value) - 1429) < 175);
  CHECK(randint(0, 5, {3}, {DType::i32}, &generator).dtype() == DType::i32);
  CHECK_THROWS_WITH_AS(randint(3, 3, {2}), "randint: expected low < high, got [3, 3)", Error);
}

TEST_CASE("a seed reproduces the same draws and different seeds give different ones") {
  Generator a(42), b(42), c(43);
  const auto first = test::values(rand({1000}, {}, &a));
  CHECK(first == test::values(rand({1000}, {}, &b)));
  CHECK(first != test::values(rand({1000}, {}, &c)));
  // The next draw continues the stream instead of repeating it.
  CHECK(test::values(rand({1000}, {}, &a)) != first);
  a.manual_seed(42);
  CHECK(test::values(rand({1000}, {}, &a)) == first);
  // The default generator follows manual_seed too.
  manual_seed(5);
  const auto default_draw = test::values(randn({100}));
  manual_seed(5);
  CHECK(test::values(randn({100})) == default_draw);
}

TEST_CASE("random draws do not depend on the number of threads") {
  auto draws = [](int threads) {
    test::NumThreadsGuard guard(threads);
    Generator generator(11);
    std::vector<double> all = test::values(rand({300001}, {}, &generator));
    for (const Tensor& t :
         {randn({300001}, {DType::f64}, &generator), randint(0, 1000, {300001}, {DType::i64}, &generator),
          rand({300001}, {DType::bf16}, &generator)}) {
      const auto v = test::values(t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  CHECK(draws(1) == draws(2));
}

TEST_CASE("philox_batch computes the blocks of philox4x32_10, also where the counter carries") {
  const uint64_t seeds[] = {0, 42, 0x9E3779B97F4A7C15ull};
  // A counter crossing 2^32 (the low word carries into the high one) and one wrapping at 2^64.
  const uint64_t firsts[] = {0, 1000003, (uint64_t(1) << 32) - 5, (uint64_t(1) << 32) - 21, ~uint64_t(0) - 6};
  for (uint64_t seed : seeds) {
    for (uint64_t first : firsts) {
      const cpu::PhiloxBatch batch = cpu::philox_batch(seed, first);
      for (int l = 0; l < cpu::kPhiloxBatch; ++l) {
        const PhiloxBlock block = philox4x32_10(seed, first + static_cast<uint64_t>(l));
        for (int w = 0; w < 4; ++w) {
          CAPTURE(seed);
          CAPTURE(first);
          CAPTURE(l);
          CHECK(batch.word[w][l] == block.word[w]);
        }
      }
    }
  }
}

TEST_CASE("every random fill holds, bit for bit, the draws of its definition in every dtype and size") {
  RandomDraw uniform{.kind = RandomDraw::Kind::uniform};
  uniform.low = -0.5;
  uniform.span = 3.0;
  RandomDraw normal{.kind = RandomDraw::Kind::normal};
  normal.mean = 0.25;
  normal.std = 2.0;
  RandomDraw randint_draw{.kind = RandomDraw::Kind::randint};
  randint_draw.int_low = -7;
  randint_draw.int_range = 1000;
  RandomDraw bernoulli{.kind = RandomDraw::Kind::bernoulli};
  bernoulli.p = 0.3;
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64};
  // Sizes around one batch of blocks (32 elements), odd ones (a last half block), and one large
  // enough for every thread; the generator starts past 0, with a seed using its high word.
  const int64_t sizes[] = {1, 2, 31, 32, 33, 1001, 200001};
  for (const RandomDraw& draw : {uniform, normal, randint_draw, bernoulli}) {
    for (DType dtype : dtypes) {
      if (dtype == DType::i64 && draw.kind != RandomDraw::Kind::randint) continue;
      for (int64_t n : sizes) {
        CAPTURE(dtype);
        CAPTURE(n);
        INFO("kind ", static_cast<int>(draw.kind));
        Generator generator(0x0123456789ABCDEFull);
        generator.set_offset(12345);
        const Tensor t = empty({n}, {dtype});
        RandomDraw d = draw;
        switch (d.kind) {
          case RandomDraw::Kind::uniform:
            kernels::uniform_(t, d.low, d.low + d.span, generator);
            d.grid = std::ldexp(1.0, significand_bits(dtype));  // what uniform_ keeps of each draw
            break;
          case RandomDraw::Kind::normal: kernels::normal_(t, d.mean, d.std, generator); break;
          case RandomDraw::Kind::randint:
            kernels::randint_(t, d.int_low, d.int_low + static_cast<int64_t>(d.int_range), generator);
            break;
          case RandomDraw::Kind::bernoulli: kernels::bernoulli_(t, d.p, generator); break;
        }
        CHECK(generator.offset() == 12345 + static_cast<uint64_t>((n + 1) / 2));
        CHECK(test::values(t) == draws_by_definition(dtype, n, generator.seed(), 12345, d));
      }
    }
  }
}

TEST_CASE("a random fill of a non-contiguous tensor matches the same draw into a contiguous one") {
  Generator a(13), b(13);
  const Tensor expected = rand({3, 4}, {}, &a);
  const Tensor target = zeros({4, 3}).t();  // shape [3, 4], column-major memory
  REQUIRE_FALSE(target.is_contiguous());
  kernels::uniform_(target, 0.0, 1.0, b);
  CHECK(test::values(target) == test::values(expected));
  CHECK(a.offset() == b.offset());
}
