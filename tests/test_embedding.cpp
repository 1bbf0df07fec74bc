// nn::Embedding and its op: initialisation, lookups, the gradient (repeated indices, padding_idx),
// from_pretrained, max_norm, determinism and errors.
#include <cmath>

#include "helpers.h"

using namespace sg;

namespace {

Tensor f64(const std::vector<double>& values, const Shape& shape = {}) { return tensor(values, shape); }
Tensor i64(const std::vector<int64_t>& values, const Shape& shape = {}) { return tensor(values, shape); }

}  // namespace

TEST_CASE("Embedding draws its weight from N(0, 1) with the given generator, the padding row zeroed") {
  Generator layer_generator(5), reference_generator(5);
  nn::Embedding layer(100, 16, {.padding_idx = -1}, &layer_generator);
  CHECK(layer.weight.sizes() == Shape{100, 16});
  CHECK(layer.weight.requires_grad());
  CHECK(layer.options.padding_idx == 99);  // stored wrapped
  Tensor expected = empty({100, 16});
  nn::init::normal_(expected, 0.0, 1.0, &reference_generator);
  CHECK(test::values(layer.weight.narrow(0, 0, 99)) == test::values(expected.narrow(0, 0, 99)));
  CHECK(test::values(layer.weight.select(0, 99)) == std::vector<double>(16, 0.0));
  const auto names = layer.state_dict();
  CHECK(names.size() == 1);
  CHECK(names.count("weight") == 1);
}

TEST_CASE("Embedding maps indices of any shape to [..., embedding_dim] rows of its weight") {
  auto layer = nn::Embedding::from_pretrained(f64({0, 1, 10, 11, 20, 21}, {3, 2}));
  const Tensor out = (*layer)(i64({2, 0, 2, 1, 1, 0}, {2, 3}));
  CHECK(out.sizes() == Shape{2, 3, 2});
  CHECK(test::values(out) == std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11, 10, 11, 0, 1});
  CHECK((*layer)(scalar_tensor(1, {DType::i32})).sizes() == Shape{2});
  CHECK((*layer)(zeros({0, 4}, {DType::i64})).sizes() == Shape{0, 4, 2});
}

TEST_CASE("Embedding gradient adds up repeated indices and gives the padding row none") {
  nn::Embedding layer(4, 2, {.padding_idx = 3}, &test::rng());
  const Tensor ids = i64({1, 3, 1, 0, 1, 3}, {2, 3});
  const Tensor out = layer(ids);
  CHECK(test::values(out.select(0, 0).select(0, 1)) == std::vector<double>{0, 0});  // the padding row's value
  out.sum().backward();
  CHECK(test::values(layer.weight.grad()) == std::vector<double>{1, 1, 3, 3, 0, 0, 0, 0});
}

TEST_CASE("embedding gradient matches finite differences with repeated indices and a padding row") {
  const Tensor ids = i64({0, 2, 0, 4, 2, 3, 0, 1, 2}, {3, 3});
  CHECK_GRADCHECK([ids](const TensorList& in) { return embedding(in[0], ids); }, {test::noncontiguous_input({5, 3})});
  // Row 2 is the padding row: its gradient is zero by definition, not its derivative, so the table
  // is built with a constant row there and the other rows as the inputs.
  for (int64_t padding_idx : {2, -3}) {
    CAPTURE(padding_idx);
    CHECK_GRADCHECK(
        [ids, padding_idx](const TensorList& in) {
          return embedding(cat({in[0], zeros({1, 3}, {DType::f64}), in[1]}), ids, padding_idx);
        },
        {test::rand_input({2, 3}), test::rand_input({2, 3})});
  }
}

TEST_CASE("Embedding gradient is the same bits for any thread count") {
  nn::Embedding layer(50, 64, {.padding_idx = 7}, &test::rng());
  const Tensor ids = randint(0, 50, {40, 125}, {DType::i64}, &test::rng());
  const Tensor g = randn({40, 125, 64}, {}, &test::rng());
  auto gradient = [&] {
    layer.zero_grad();
    layer(ids).backward(g);
    return layer.weight.grad().clone();
  };
  Tensor serial, parallel;
  {
    test::NumThreadsGuard one(1);
    serial = gradient();
  }
  {
    test::NumThreadsGuard two(2);
    parallel = gradient();
  }
  CHECK(test::values(serial) == test::values(parallel));
  CHECK(test::values(serial.select(0, 7)) == std::vector<double>(64, 0.0));
}

TEST_CASE("Embedding rejects an out-of-range or negative index, naming it and the table size") {
  nn::Embedding layer(10, 3, {}, &test::rng());
  CHECK_THROWS_WITH_AS(layer(i64({1, 10})),
                       doctest::Contains("embedding: index 10 is out of range for size 10 (num_embeddings of weight "
                                         "[10, 3])"),
                       Error);
  CHECK_THROWS_WITH_AS(layer(i64({-1, 2})), doctest::Contains("index -1 is out of range for size 10"), Error);
  CHECK_THROWS_WITH_AS(layer(f64({1})), doctest::Contains("expected an i64 or i32 index"), Error);
}

TEST_CASE("a padding_idx outside -num_embeddings .. num_embeddings - 1 is an error naming both") {
  CHECK_THROWS_WITH_AS(nn::Embedding(10, 3, {.padding_idx = 10}),
                       doctest::Contains("Embedding: padding_idx 10 is out of range for num_embeddings 10"), Error);
  CHECK_THROWS_WITH_AS(nn::Embedding(10, 3, {.padding_idx = -11}), doctest::Contains("padding_idx -11"), Error);
  CHECK_THROWS_WITH_AS(embedding(zeros({3, 2}), i64({0}), 3),
                       doctest::Contains("embedding: padding_idx 3 is out of range for num_embeddings 3"), Error);
  CHECK_THROWS_AS(nn::Embedding(-1, 3), Error);
}

TEST_CASE("from_pretrained shares the given table, frozen unless asked, and keeps its padding row") {
  const Tensor table = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  auto frozen = nn::Embedding::from_pretrained(table);
  CHECK(frozen->num_embeddings == 3);
  CHECK(frozen->embedding_dim == 2);
  CHECK_FALSE(frozen->weight.requires_grad());
  CHECK(frozen->weight.storage() == table.storage());
  CHECK_FALSE((*frozen)(i64({0})).requires_grad());

  auto trainable = nn::Embedding::from_pretrained(table.clone(), /*freeze=*/false, {.padding_idx = 0});
  CHECK(trainable->weight.requires_grad());
  CHECK_FALSE(table.requires_grad());  // the caller's tensor is left as it was
  CHECK(test::values(trainable->weight.select(0, 0)) == std::vector<double>{1, 2});  // not zeroed
  (*trainable)(i64({0, 2, 0})).sum().backward();
  CHECK(test::values(trainable->weight.grad()) == std::vector<double>{0, 0, 0, 0, 1, 1});
  CHECK_THROWS_WITH_AS(nn::Embedding::from_pretrained(zeros({4})), doctest::Contains("embeddings must be 2-D"), Error);
}

TEST_CASE("max_norm scales the looked-up rows longer than it down to it, in place, and leaves the rest") {
  // Row norms 5, 0.5, 10, 1.
  auto layer = nn::Embedding::from_pretrained(f64({3, 4, 0.3, 0.4, 6, 8, 1, 0}, {4, 2}), false, {.max_norm = 2.0});
  const Tensor out = (*layer)(i64({0, 1, 0}));
  // max_norm / (norm + 1e-7), PyTorch's factor: 1e-6 covers the 1e-7.
  test::check_close(layer->weight, {1.2, 1.6, 0.3, 0.4, 6, 8, 1, 0}, 1e-6);
  test::check_close(out, {1.2, 1.6, 0.3, 0.4, 1.2, 1.6}, 1e-6);
  out.sum().backward();  // the renorm is outside the graph: the lookup's gradient is unchanged
  CHECK(test::values(layer->weight.grad()) == std::vector<double>{2, 2, 1, 1, 0, 0, 0, 0});

  auto l1 = nn::Embedding::from_pretrained(f64({3, 4}, {1, 2}), true, {.max_norm = 2.0, .norm_type = 1.0});
  (*l1)(i64({0}));
  test::check_close(l1->weight, {6.0 / 7, 8.0 / 7}, 1e-6);  // L1 norm 7
}

TEST_CASE("Embedding prints as PyTorch does") {
  CHECK(nn::Embedding(10, 3).str() == "Embedding(10, 3)");
  CHECK(nn::Embedding(10, 3, {.padding_idx = -1, .max_norm = 1.5}).str() ==
        "Embedding(10, 3, padding_idx=9, max_norm=1.5)");
}
