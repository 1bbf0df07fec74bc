// Joining and indexing ops: values against hand-computed results (PyTorch's semantics),
// gradients against finite differences, fast paths against strided paths, and errors.
#include "helpers.h"

using namespace sg;

namespace {

// (like sg::tensor, one value and no shape gives a 0-dim tensor)
Tensor f64(const std::vector<double>& values, const Shape& shape = {}) { return tensor(values, shape); }
Tensor i64(const std::vector<int64_t>& values, const Shape& shape = {}) { return tensor(values, shape); }
Tensor i32(const std::vector<int32_t>& values, const Shape& shape = {}) { return tensor(values, shape); }

// An f64 tensor of `shape` holding 1, 2, 3, ... in row-major order.
Tensor counting(const Shape& shape) {
  return arange(1, static_cast<double>(numel_of(shape)) + 1, 1, {DType::f64}).reshape(shape);
}

std::vector<double> grad_values(const Tensor& t) { return test::values(t.grad()); }

// Runs fn once on 1 thread and once on 2, and checks the results are bit-identical.
void check_same_for_any_thread_count(const std::function<Tensor()>& fn) {
  const int threads = get_num_threads();
  set_num_threads(1);
  const Tensor serial = fn();
  set_num_threads(2);
  const Tensor parallel = fn();
  set_num_threads(threads);
  CHECK(test::max_abs_diff(serial, parallel) == 0.0);
}

}  // namespace

// ---- cat ----

TEST_CASE("cat joins tensors along a dim, negative dims counting from the end") {
  const Tensor a = f64({1, 2, 3, 4}, {2, 2});
  const Tensor b = f64({5, 6}, {2, 1});
  const Tensor c = f64({7, 8}, {1, 2});
  const Tensor along_last = cat({a, b}, -1);
  CHECK(along_last.sizes() == Shape{2, 3});
  CHECK(test::values(along_last) == std::vector<double>{1, 2, 5, 3, 4, 6});
  const Tensor along_first = cat({a, c, a}, 0);
  CHECK(along_first.sizes() == Shape{5, 2});
  CHECK(test::values(along_first) == std::vector<double>{1, 2, 3, 4, 7, 8, 1, 2, 3, 4});
}

TEST_CASE("cat promotes dtypes and skips 1-D empty tensors as PyTorch does") {
  const Tensor mixed = cat({i64({1, 2}), tensor(std::vector<float>{0.5f}, {1})});
  CHECK(mixed.dtype() == DType::f32);
  CHECK(test::values(mixed) == std::vector<double>{1, 2, 0.5});
  CHECK(cat({i32({1}, {1}), i64({2}, {1})}).dtype() == DType::i64);
  // A [0] tensor is skipped even beside 2-D tensors, and does not fix the dim to wrap against.
  const Tensor a = f64({1, 2, 3, 4}, {2, 2});
  const Tensor skipped = cat({zeros({0}), a, zeros({0})}, 1);
  CHECK(skipped.sizes() == Shape{2, 2});
  CHECK(test::values(skipped) == test::values(a));
  // An empty tensor of the right rank takes part normally.
  CHECK(cat({a, zeros({2, 0}, {DType::f64})}, 1).sizes() == Shape{2, 2});
}

TEST_CASE("cat reads non-contiguous inputs where they lie") {
  const Tensor x = randn({5, 3}, {}, &test::rng());
  const Tensor y = randn({3, 8}, {}, &test::rng());
  const Tensor strided = cat({x.t(), y.slice(1, 1, 8, 2)}, 1);
  const Tensor dense = cat({x.t().contiguous(), y.slice(1, 1, 8, 2).contiguous()}, 1);
  CHECK(strided.sizes() == Shape{3, 9});
  CHECK(test::max_abs_diff(strided, dense) == 0.0);
}

TEST_CASE("cat rejects mismatched shapes, naming both") {
  const Tensor a = zeros({2, 2});
  CHECK_THROWS_WITH_AS(cat({a, zeros({3, 3})}, 0), doctest::Contains("[2, 2] (tensor 0) and [3, 3] (tensor 1)"), Error);
  CHECK_THROWS_WITH_AS(cat({a, zeros({2})}, 0), doctest::Contains("[2, 2] (tensor 0) and [2] (tensor 1)"), Error);
  CHECK_THROWS_WITH_AS(cat({a, zeros({})}, 0), doctest::Contains("zero-dimensional tensor (at position 1)"), Error);
  CHECK_THROWS_AS(cat({}, 0), Error);
  CHECK_THROWS_AS(cat({a, a}, 2), Error);
}

TEST_CASE("cat sends each input its slice of the gradient") {
  Tensor a = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor b = tensor(std::vector<float>{5, 6}, {2, 1}).requires_grad_();
  const Tensor out = cat({a, b}, 1);
  (out * f64({1, 2, 3, 4, 5, 6}, {2, 3})).sum().backward();
  CHECK(grad_values(a) == std::vector<double>{1, 2, 4, 5});
  CHECK(b.grad().dtype() == DType::f32);  // the gradient comes back in the input's own dtype
  CHECK(grad_values(b) == std::vector<double>{3, 6});
}

TEST_CASE("cat gradient matches finite differences on transposed and sliced inputs") {
  const Tensor x = test::rand_input({3, 2});
  const Tensor y = test::rand_input({2, 5});
  const Tensor z = test::rand_input({2, 1});
  CHECK_GRADCHECK([](const TensorList& in) { return cat({in[0].t(), in[1].slice(1, 0, 5, 2), in[2]}, -1); }, {x, y, z});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        return cat({in[0], in[1].t(), zeros({0}, {DType::f64})}, 0);
      },
      {x, test::rand_input({2, 3})});
}

// ---- stack ----

TEST_CASE("stack inserts a new dim, which may be negative") {
  const Tensor a = f64({1, 2, 3}), b = f64({4, 5, 6});
  const Tensor rows = stack({a, b});
  CHECK(rows.sizes() == Shape{2, 3});
  CHECK(test::values(rows) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const Tensor columns = stack({a, b}, -1);
  CHECK(columns.sizes() == Shape{3, 2});
  CHECK(test::values(columns) == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(stack({i32({1}), f64({0.5})}).dtype() == DType::f64);
}

TEST_CASE("stack rejects tensors of different shapes, naming both") {
  CHECK_THROWS_WITH_AS(stack({zeros({3}), zeros({2})}), doctest::Contains("[3] at entry 0 and [2] at entry 1"), Error);
  CHECK_THROWS_AS(stack({zeros({3})}, 2), Error);
}

TEST_CASE("stack gradient matches finite differences on non-contiguous inputs") {
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        return stack({in[0].t(), in[1], in[0].t() * in[1]}, 1);
      },
      {test::rand_input({4, 3}), test::rand_input({3, 4})});
}

// ---- split and chunk ----

TEST_CASE("split by size leaves a smaller last piece, and the pieces are views") {
  const Tensor x = arange(10).reshape({2, 5});
  const TensorList pieces = split(x, 2, 1);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[0].sizes() == Shape{2, 2});
  CHECK(pieces[2].sizes() == Shape{2, 1});
  CHECK(test::values(pieces[1]) == std::vector<double>{2, 3, 7, 8});
  CHECK(test::values(pieces[2]) == std::vector<double>{4, 9});
  CHECK(pieces[1].storage() == x.storage());
  CHECK(split(x, 7, -1).size() == 1);
  CHECK(split(zeros({0, 3}), 0, 0).size() == 1);  // size 0 may be split in pieces of 0
}

TEST_CASE("split by a list of sizes must cover the dim exactly") {
  const Tensor x = arange(10).reshape({2, 5});
  const TensorList pieces = split(x, std::vector<int64_t>{1, 0, 4}, -1);
  REQUIRE(pieces.size() == 3);
  CHECK(test::values(pieces[0]) == std::vector<double>{0, 5});
  CHECK(pieces[1].sizes() == Shape{2, 0});
  CHECK(test::values(pieces[2]) == std::vector<double>{1, 2, 3, 4, 6, 7, 8, 9});
  CHECK_THROWS_WITH_AS(split(x, std::vector<int64_t>{2, 2}, 1), doctest::Contains("must sum exactly to 5"), Error);
  CHECK_THROWS_AS(split(x, std::vector<int64_t>{6, -1}, 1), Error);
  CHECK_THROWS_WITH_AS(split(x, 0, 1), doctest::Contains("split_size can only be 0"), Error);
  CHECK_THROWS_AS(split(x, -1, 1), Error);
  CHECK_THROWS_AS(split(zeros({}), 1), Error);
}

TEST_CASE("chunk makes pieces of ceil(size / chunks), so it may return fewer") {
  auto sizes_along = [](const TensorList& pieces, int64_t dim) {
    std::vector<int64_t> sizes;
    for (const Tensor& p : pieces) sizes.push_back(p.size(dim));
    return sizes;
  };
  CHECK(sizes_along(chunk(arange(6), 4), 0) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes_along(chunk(arange(5), 3), 0) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes_along(chunk(arange(5), 10), 0) == std::vector<int64_t>{1, 1, 1, 1, 1});
  CHECK(sizes_along(chunk(zeros({3, 0}), 3, -1), 1) == std::vector<int64_t>{0, 0, 0});
  const TensorList pieces = chunk(arange(6).reshape({2, 3}), 2, -1);
  CHECK(test::values(pieces[0]) == std::vector<double>{0, 1, 3, 4});
  CHECK(test::values(pieces[1]) == std::vector<double>{2, 5});
  CHECK_THROWS_WITH_AS(chunk(arange(6), 0), doctest::Contains("greater than 0"), Error);
}

TEST_CASE("split and chunk gradients flow through the narrow views") {
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        const TensorList p = split(in[0].t(), 2, 1);  // [3, 2], [3, 2], [3, 1]
        return p[0] * p[1] + p[2];
      },
      {test::rand_input({5, 3})});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        const TensorList p = chunk(in[0], 2, -1);  // [3, 3], [3, 2]
        return cat({p[1] * p[1], p[0]}, 1);
      },
      {test::rand_input({3, 5})});
}

// ---- index_select ----

TEST_CASE("index_select picks slices along a dim, repeats included") {
  const Tensor x = counting({3, 3});
  const Tensor rows = index_select(x, 0, i64({2, 0, 2}));
  CHECK(rows.sizes() == Shape{3, 3});
  CHECK(test::values(rows) == std::vector<double>{7, 8, 9, 1, 2, 3, 7, 8, 9});
  const Tensor columns = index_select(x, -1, i32({1, 1}));
  CHECK(columns.sizes() == Shape{3, 2});
  CHECK(test::values(columns) == std::vector<double>{2, 2, 5, 5, 8, 8});
  const Tensor scalar_index = index_select(x, 1, scalar_tensor(2, {DType::i64}));
  CHECK(scalar_index.sizes() == Shape{3, 1});
  CHECK(test::values(scalar_index) == std::vector<double>{3, 6, 9});
  CHECK(index_select(x, 0, i64({})).sizes() == Shape{0, 3});
  const Tensor of_scalar = index_select(scalar_tensor(4.5, {DType::f64}), 0, i64({0}));
  CHECK(of_scalar.dim() == 0);
  CHECK(of_scalar.item() == 4.5);
}

TEST_CASE("index_select of strided inputs matches the contiguous row-copy path") {
  // A transpose, a stepped slice and a permuted 3-D tensor take the strided path; their
  // contiguous copies take the row-copy path. Large enough for both to run in parallel.
  const Tensor x = randn({300, 257}, {}, &test::rng());
  const Tensor index = randint(0, 300, {211}, {DType::i64}, &test::rng());
  const Tensor xt = x.t();
  CHECK(test::max_abs_diff(index_select(xt, 1, index), index_select(xt.contiguous(), 1, index)) == 0.0);
  const Tensor stepped = x.slice(1, 1, 257, 3);
  const Tensor rows = randint(0, 300, {77}, {DType::i32}, &test::rng());
  CHECK(test::max_abs_diff(index_select(stepped, 0, rows), index_select(stepped.contiguous(), 0, rows)) == 0.0);
  const Tensor cube = randn({5, 7, 9}, {}, &test::rng()).permute({2, 0, 1});
  const Tensor middle = i64({4, 4, 0, 3});
  CHECK(test::max_abs_diff(index_select(cube, 1, middle), index_select(cube.contiguous(), 1, middle)) == 0.0);
  // A stepped (non-contiguous) index and a 0-dim index, on both paths.
  const Tensor every_other = randint(0, 300, {100}, {DType::i64}, &test::rng()).slice(0, 0, 100, 2);
  CHECK(test::max_abs_diff(index_select(xt, 1, every_other),
                           index_select(x.t().contiguous(), 1, every_other.contiguous())) == 0.0);
  const Tensor single = scalar_tensor(7, {DType::i64});
  CHECK(test::max_abs_diff(index_select(xt, 1, single), index_select(xt.contiguous(), 1, single)) == 0.0);
  // And both against the definition, slice by slice.
  const Tensor picked = index_select(cube, 1, middle);
  for (int64_t j = 0; j < 4; ++j)
    CHECK(test::max_abs_diff(picked.select(1, j), cube.select(1, middle[j].item<int64_t>())) == 0.0);
}

TEST_CASE("index_select gradient accumulates repeated indices") {
  Tensor x = test::rand_input({4});
  index_select(x, 0, i64({1, 1, 3, 1})).sum().backward();
  CHECK(grad_values(x) == std::vector<double>{0, 3, 0, 1});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        return index_select(in[0].t(), 1, i64({4, 0, 4, 2, 4}));
      },
      {test::rand_input({5, 3})});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        return index_select(in[0], 0, i32({2, 2, 0}));
      },
      {test::rand_input({3, 4})});
  const Tensor stepped = i64({2, 9, 0, 9, 2, 9, 1, 9}).slice(0, 0, 8, 2);  // 2, 0, 2, 1
  CHECK_GRADCHECK([stepped](const TensorList& in) { return index_select(in[0], 1, stepped); },
                  {test::rand_input({2, 3})});
}

// ---- gather and scatter_add ----

TEST_CASE("gather reads along a dim as torch.gather") {
  const Tensor x = f64({1, 2, 3, 4}, {2, 2});
  CHECK(test::values(gather(x, 1, i64({0, 0, 1, 0}, {2, 2}))) == std::vector<double>{1, 1, 4, 3});
  const Tensor y = counting({3, 3});
  CHECK(test::values(gather(y, 0, i64({0, 1, 2, 2, 0, 0}, {2, 3}))) == std::vector<double>{1, 5, 9, 7, 2, 3});
  // The index may be smaller than the input off `dim`; the output takes the index's shape.
  const Tensor picked = gather(counting({3, 4}), -1, i64({1, 2}, {2, 1}));
  CHECK(picked.sizes() == Shape{2, 1});
  CHECK(test::values(picked) == std::vector<double>{2, 7});
  CHECK(gather(scalar_tensor(3.5, {DType::f64}), 0, scalar_tensor(0, {DType::i64})).item() == 3.5);
}

TEST_CASE("gather of a transposed input matches gather of its contiguous copy") {
  const Tensor x = randn({40, 33}, {}, &test::rng()).t();  // [33, 40]
  const Tensor index = randint(0, 33, {50, 40}, {DType::i64}, &test::rng());
  CHECK(test::max_abs_diff(gather(x, 0, index), gather(x.contiguous(), 0, index)) == 0.0);
  CHECK(test::max_abs_diff(gather(x, 0, index), gather(x, 0, index.to(DType::i32))) == 0.0);
}

TEST_CASE("gather gradient scatters back, summing duplicates") {
  Tensor x = test::rand_input({2, 3});
  gather(x, 1, i64({2, 2, 0, 1, 1, 1}, {2, 3})).sum().backward();
  CHECK(grad_values(x) == std::vector<double>{1, 0, 2, 0, 3, 0});
  const Tensor index = i64({4, 0, 4, 1, 2, 2, 3, 3, 0, 4, 4, 4}, {4, 3});
  CHECK_GRADCHECK([index](const TensorList& in) { return gather(in[0].t(), 0, index); }, {test::rand_input({4, 5})});
}

TEST_CASE("scatter_add adds src at the indexed positions, duplicates summing") {
  const Tensor out = scatter_add(zeros({3, 5}, {DType::f64}), 0, i64({0, 1, 2, 0, 0, 0, 1, 2, 2, 2}, {2, 5}),
                                 ones({2, 5}, {DType::f64}));
  CHECK(test::values(out) == std::vector<double>{2, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 2, 1, 1});
  const Tensor x = f64({10, 20, 30});
  CHECK(test::values(scatter_add(x, 0, i64({0, 2, 0, 0}), f64({1, 2, 3, 4}))) == std::vector<double>{18, 20, 32});
  // src may be larger than index: only the positions the index covers are read.
  CHECK(test::values(scatter_add(x, -1, i64({0, 2, 0, 0}), f64({1, 2, 3, 4, 5, 6}))) ==
        std::vector<double>{18, 20, 32});
  CHECK(test::values(x) == std::vector<double>{10, 20, 30});  // out of place
  CHECK(test::values(scatter_add(arange(3), 0, i32({1, 1}), i64({5, 6}))) == std::vector<double>{0, 12, 2});
}

TEST_CASE("scatter_add gradient is the identity for the input and a gather for src") {
  Tensor x = test::rand_input({3});
  Tensor src = test::rand_input({4});
  (scatter_add(x, 0, i64({2, 2, 0}), src) * f64({1, 2, 3})).sum().backward();
  CHECK(grad_values(x) == std::vector<double>{1, 2, 3});
  CHECK(grad_values(src) == std::vector<double>{3, 3, 1, 0});  // src[3] is never read
  const Tensor index = i64({2, 0, 2, 1, 2, 0, 0, 1, 2, 2}, {2, 5});
  CHECK_GRADCHECK([index](const TensorList& in) { return scatter_add(in[0].t(), 0, index, in[1]); },
                  {test::rand_input({5, 3}), test::rand_input({4, 6})});
  CHECK_GRADCHECK([index](const TensorList& in) { return scatter_add(in[0], 1, index.t().contiguous(), in[1].t()); },
                  {test::rand_input({5, 3}), test::rand_input({3, 5})});
}

TEST_CASE("scatter_add and gather give the same bits for any thread count") {
  const Tensor index = randint(0, 17, {4000, 33}, {DType::i64}, &test::rng());
  const Tensor src = randn({4000, 33}, {}, &test::rng());
  check_same_for_any_thread_count([&] { return scatter_add(zeros({17, 33}), 0, index, src); });
  const Tensor x = randn({17, 33}, {}, &test::rng());
  check_same_for_any_thread_count([&] { return gather(x, 0, index); });
}

// ---- embedding ----

TEST_CASE("embedding looks up weight rows for indices of any shape") {
  const Tensor weight = f64({0, 1, 10, 11, 20, 21}, {3, 2});
  const Tensor out = embedding(weight, i64({2, 0, 2, 1}, {2, 2}));
  CHECK(out.sizes() == Shape{2, 2, 2});
  CHECK(test::values(out) == std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11});
  const Tensor single = embedding(weight, scalar_tensor(1, {DType::i32}));
  CHECK(single.sizes() == Shape{2});
  CHECK(test::values(single) == std::vector<double>{10, 11});
  // A transposed weight is read where it lies.
  const Tensor wide = f64({0, 10, 20, 1, 11, 21}, {2, 3});
  CHECK(test::values(embedding(wide.t(), i64({2, 0}))) == std::vector<double>{20, 21, 0, 1});
}

TEST_CASE("embedding gradient sums the rows of repeated ids") {
  Tensor weight = test::rand_input({3, 2});
  embedding(weight, i64({0, 2, 0, 0}, {2, 2})).sum().backward();
  CHECK(grad_values(weight) == std::vector<double>{3, 3, 0, 0, 1, 1});
  const Tensor ids = i64({3, 1, 3, 3, 0, 1}, {2, 3});
  CHECK_GRADCHECK([ids](const TensorList& in) { return embedding(in[0], ids); }, {test::rand_input({5, 3})});
  CHECK_GRADCHECK([ids](const TensorList& in) { return embedding(in[0].t(), ids.to(DType::i32)); },
                  {test::rand_input({3, 5})});
}

TEST_CASE("embedding backward equals scatter_add and is the same for any thread count") {
  // Large enough to run in parallel; ids repeat about 80 times each.
  const int64_t vocab = 1000, dim = 64, count = 4096;
  const Tensor ids = randint(0, 50, {count}, {DType::i64}, &test::rng());
  const Tensor g = randn({count, dim}, {}, &test::rng());
  auto embedding_grad = [&] {
    Tensor weight = zeros({vocab, dim}).requires_grad_();
    embedding(weight, ids).backward(g);
    return weight.grad();
  };
  check_same_for_any_thread_count(embedding_grad);
  // Both add a row's contributions in increasing position, so even f32 bits agree.
  const Tensor reference = scatter_add(zeros({vocab, dim}), 0, ids.unsqueeze(1).expand({count, dim}), g);
  CHECK(test::max_abs_diff(embedding_grad(), reference) == 0.0);
}

TEST_CASE("embedding backward in bf16 sums in float and rounds once") {
  // Adding 1 three hundred times in bf16 steps would stall at 256 (257 is not representable).
  Tensor weight = zeros({3, 4}, {DType::bf16}).requires_grad_();
  embedding(weight, zeros({300}, {DType::i64})).sum().backward();
  CHECK(weight.grad().dtype() == DType::bf16);
  CHECK(test::values(weight.grad().select(0, 0)) == std::vector<double>{300, 300, 300, 300});
  CHECK(test::values(weight.grad().select(0, 1)) == std::vector<double>{0, 0, 0, 0});
}

// ---- one_hot ----

TEST_CASE("one_hot infers num_classes as max + 1 and gives i64") {
  const Tensor inferred = one_hot(i64({0, 2, 1}));
  CHECK(inferred.dtype() == DType::i64);
  CHECK(inferred.sizes() == Shape{3, 3});
  CHECK(test::values(inferred) == std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0});
  const Tensor explicit_classes = one_hot(i32({1, 0, 1, 1}, {2, 2}), 4);
  CHECK(explicit_classes.sizes() == Shape{2, 2, 4});
  CHECK(test::values(explicit_classes) == std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0});
  CHECK(one_hot(i64({}), 4).sizes() == Shape{0, 4});
  CHECK_THROWS_WITH_AS(one_hot(i64({})), doctest::Contains("cannot infer"), Error);
  CHECK_THROWS_WITH_AS(one_hot(i64({0, -1})), doctest::Contains("non-negative, got index -1"), Error);
}

// ---- tril and triu ----

TEST_CASE("tril and triu keep the requested diagonals of every matrix in a batch") {
  const Tensor x = counting({2, 3, 4});
  auto first = [](const Tensor& t) { return test::values(t.select(0, 0)); };
  CHECK(first(tril(x)) == std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  CHECK(first(tril(x, 1)) == std::vector<double>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  CHECK(first(tril(x, -1)) == std::vector<double>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  CHECK(first(triu(x)) == std::vector<double>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  CHECK(first(triu(x, 1)) == std::vector<double>{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  CHECK(first(triu(x, -1)) == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  // The second matrix holds the first plus 12, so its kept entries are the first's plus 12.
  for (const Tensor& out : {tril(x, -1), triu(x, 2)}) {
    const Tensor expected = where(ne(out.select(0, 0), 0.0), out.select(0, 0) + 12.0, 0.0);
    CHECK(test::values(out.select(0, 1)) == test::values(expected));
  }
  CHECK(test::values(tril(x, 100)) == test::values(x));
  CHECK(test::values(triu(x, -100)) == test::values(x));
  CHECK(test::values(sum(abs(tril(x, -100)))) == std::vector<double>{0});
}

TEST_CASE("tril and triu read transposed inputs and any dtype") {
  const Tensor a = f64({1, 2, 3, 4}, {2, 2});
  CHECK(test::values(tril(a.t())) == std::vector<double>{1, 0, 2, 4});
  CHECK(test::values(triu(a.t())) == std::vector<double>{1, 3, 0, 4});
  const Tensor batch = randn({3, 5, 4}, {}, &test::rng()).transpose(1, 2);
  CHECK(test::max_abs_diff(triu(batch, 1), triu(batch.contiguous(), 1)) == 0.0);
  const Tensor mask = tril(ones({3, 3}, {DType::boolean}));
  CHECK(mask.dtype() == DType::boolean);
  CHECK(test::values(mask) == std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK_THROWS_WITH_AS(tril(zeros({3})), doctest::Contains("at least 2 dims"), Error);
}

TEST_CASE("tril and triu gradients apply the same mask") {
  Tensor x = test::rand_input({2, 2});
  tril(x).sum().backward();
  CHECK(grad_values(x) == std::vector<double>{1, 0, 1, 1});
  CHECK_GRADCHECK([](const TensorList& in) { return tril(in[0].transpose(1, 2), 1); }, {test::rand_input({2, 4, 3})});
  CHECK_GRADCHECK([](const TensorList& in) { return triu(in[0].transpose(1, 2), -1); }, {test::rand_input({2, 4, 3})});
}

// ---- errors ----

TEST_CASE("an out-of-range index is an error naming the op, the index and the size") {
  const Tensor x = counting({3, 3});
  CHECK_THROWS_WITH_AS(index_select(x, 0, i64({0, 3})),
                       doctest::Contains("index_select: index 3 is out of range for size 3"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 1, i32({-1}, {1})),
                       doctest::Contains("index_select: index -1 is out of range for size 3"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, i64({0, 5}, {1, 2})),
                       doctest::Contains("gather: index 5 is out of range for size 3"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, i64({7}, {1, 1}), x),
                       doctest::Contains("scatter_add: index 7 is out of range for size 3"), Error);
  CHECK_THROWS_WITH_AS(embedding(x, i64({1, 3})), doctest::Contains("embedding: index 3 is out of range for size 3"),
                       Error);
  CHECK_THROWS_WITH_AS(one_hot(i64({0, 5}), 3), doctest::Contains("one_hot: index 5 is out of range for size 3"),
                       Error);
}

TEST_CASE("indexing ops reject wrong index dtypes and mismatched shapes") {
  const Tensor x = counting({3, 3});
  CHECK_THROWS_WITH_AS(index_select(x, 0, f64({0})), doctest::Contains("expected an i64 or i32 index"), Error);
  CHECK_THROWS_WITH_AS(embedding(x, f64({0})), doctest::Contains("expected an i64 or i32 index"), Error);
  CHECK_THROWS_AS(one_hot(f64({0})), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, i64({0, 1}, {1, 2})), doctest::Contains("[1, 2]"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 0, i64({0}, {1})), doctest::Contains("[1]"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 0, i64({0, 0, 0, 0}, {1, 4})), doctest::Contains("[3, 3]"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, i64({0, 0}, {1, 2}), f64({1}, {1, 1})), doctest::Contains("[1, 1]"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, i64({0}, {1, 1}), ones({1, 1})), doctest::Contains("src is f32"), Error);
  CHECK_THROWS_WITH_AS(embedding(f64({1, 2}), i64({0})), doctest::Contains("weight must be 2-D"), Error);
}

TEST_CASE("the indexing methods forward to the free functions") {
  const Tensor x = randn({4, 6}, {}, &test::rng());
  const Tensor index = randint(0, 6, {4, 3}, {DType::i64}, &test::rng());
  const Tensor rows = randint(0, 4, {5}, {DType::i64}, &test::rng());
  CHECK(test::max_abs_diff(x.gather(1, index), gather(x, 1, index)) == 0.0);
  CHECK(test::max_abs_diff(x.index_select(0, rows), index_select(x, 0, rows)) == 0.0);
  const Tensor src = randn({4, 3}, {}, &test::rng());
  CHECK(test::max_abs_diff(x.scatter_add(1, index, src), scatter_add(x, 1, index, src)) == 0.0);
  CHECK(x.split(4, 1).size() == 2);
  CHECK(x.chunk(3, 1)[2].sizes() == Shape{4, 2});
  CHECK(test::max_abs_diff(x.tril(1), tril(x, 1)) == 0.0);
  CHECK(test::max_abs_diff(x.triu(-1), triu(x, -1)) == 0.0);
}
