// Sorting, multinomial and embedding on the GPU against the CPU. Both devices sort the same keys
// stably (Note [Sorting by an order-preserving key], core/sort_key.h), so positions are compared
// exactly, ties and NaN included; multinomial with replacement draws the CPU's samples bit for bit.
#include <limits>
#include <set>

#include "backward_compare.h"
#include "core/kernels/sort.h"
#include "cuda_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

// Small integers (many ties) in `dtype`, NaN sprinkled in for floating dtypes, on the CPU.
Tensor tied_values(const Shape& shape, DType dtype) {
  Tensor values = randint(-4, 5, shape, {DType::i64}, &test::rng()).to(DType::f64);
  if (is_floating(dtype)) {
    double* data = values.data_ptr<double>();
    for (int64_t i = 0; i < values.numel(); i += 13) data[i] = std::numeric_limits<double>::quiet_NaN();
  }
  return values.to(dtype);
}

}  // namespace

TEST_CASE("sorted_positions on the GPU equals the CPU for every dtype, k, direction and strided inputs") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::boolean}) {
    for (bool descending : {false, true}) {
      for (int64_t k : {int64_t(1), int64_t(7), int64_t(301)}) {
        CAPTURE(dtype);
        CAPTURE(descending);
        CAPTURE(k);
        const Tensor x = tied_values({301, 37}, dtype).t();  // rows of 301 along the last dim, strided
        const Tensor cpu_positions = empty({37, k}, {DType::i64}), gpu_positions = empty({37, k}, {DType::i64, gpu()});
        kernels::sorted_positions(cpu_positions, x, descending);
        kernels::sorted_positions(gpu_positions, x.to(gpu()), descending);
        test::check_matches_cpu(gpu_positions, cpu_positions, 0.0);  // exact
      }
    }
  }
}

TEST_CASE("sort, argsort and topk on the GPU equal the CPU along any dim, gradients included") {
  const Tensor x = tied_values({6, 9, 5}, DType::f32);
  for (int64_t dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    test::check_matches_cpu(argsort(x.to(gpu()), dim, true), argsort(x, dim, true), 0.0);
    test::check_matches_cpu(topk(x.to(gpu()), 3, dim, false).second, topk(x, 3, dim, false).second, 0.0);
  }
  const Tensor distinct = randn({7, 11}, {}, &test::rng());
  test::check_forward_backward_match_cpu([](const TensorList& t) { return sort(t[0], 0).first; }, {distinct});
  test::check_forward_backward_match_cpu([](const TensorList& t) { return topk(t[0], 4).first; }, {distinct});
}

TEST_CASE("multinomial with replacement on the GPU draws the CPU's samples, bit for bit") {
  const Tensor probs = rand({17, 1000}, {}, &test::rng()) * gt(rand({17, 1000}, {}, &test::rng()), 0.3);
  for (DType dtype : {DType::f32, DType::f64, DType::f16}) {
    CAPTURE(dtype);
    Generator cpu_generator(3), gpu_generator(3);
    const Tensor cpu_samples = multinomial(probs.to(dtype), 501, true, &cpu_generator);
    const Tensor gpu_samples = multinomial(probs.to(dtype).to(gpu()), 501, true, &gpu_generator);
    test::check_matches_cpu(gpu_samples, cpu_samples, 0.0);
    CHECK(cpu_generator.offset() == gpu_generator.offset());
  }
}

TEST_CASE("multinomial without replacement on the GPU never repeats a category, errors are the CPU's") {
  Generator generator(4);
  const Tensor samples = multinomial(rand({40, 30}, {}, &generator).to(gpu()), 30, false, &generator).to(Device::cpu());
  for (int64_t r = 0; r < 40; ++r) {
    const std::vector<double> row = test::values(samples.select(0, r));
    CHECK(std::set<double>(row.begin(), row.end()).size() == 30);
  }
  const Tensor zero_row = tensor(std::vector<double>{1, 2, 0, 0}, {2, 2}).to(gpu());
  CHECK_THROWS_WITH_AS(multinomial(zero_row, 1, true), doctest::Contains("row 1 of the probabilities sums to 0"),
                       Error);
  const Tensor negative = tensor(std::vector<double>{1, -2}).to(gpu());
  CHECK_THROWS_WITH_AS(multinomial(negative, 1), doctest::Contains("must be non-negative, got -2"), Error);
}

TEST_CASE("Embedding on the GPU equals the CPU, padding row and repeated indices included, and range-checks") {
  nn::Embedding layer(20, 8, {.padding_idx = 3}, &test::rng());
  const Tensor ids = randint(0, 20, {6, 33}, {DType::i64}, &test::rng());
  test::check_forward_backward_match_cpu(
      [&](const TensorList& t) { return embedding(t[0], t[0].device().is_cuda() ? ids.to(gpu()) : ids, 3); },
      {layer.weight.detach()}, 0.0, 0.0);
  layer.to(gpu());
  CHECK_THROWS_WITH_AS(layer(tensor(std::vector<int64_t>{4, 20}).to(gpu())),
                       doctest::Contains("embedding: index 20 is out of range for size 20"), Error);
  CHECK_THROWS_WITH_AS(layer(tensor(std::vector<int64_t>{-3, 2}).to(gpu())),
                       doctest::Contains("index -3 is out of range for size 20"), Error);
}
