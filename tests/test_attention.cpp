// scaled_dot_product_attention, the fused op: forward and gradients against softmax(q k^T s + mask) v
// composed of ops in f64 (never against the fast path itself), gradcheck on views of one packed
// projection, masks that broadcast, causal with L != S, dropout against the composed op given the
// same keep-mask, fully masked rows, 16-bit inputs, thread-count independence and errors.
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace sg;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  Tensor mask{};  // bool (keep where true) or float (added), or undefined
  bool causal = false;
  double scale = 0;  // 0: 1 / sqrt(E)
  Tensor keep{};     // a dropout keep-mask, with dropout_p below
  double dropout_p = 0;
};

// The composed reference: softmax(q k^T scale + mask) v with ops, dropout applied as `keep` says.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c) {
  const int64_t L = q.size(-2), S = k.size(-2);
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  if (c.causal) scores = where(ones({L, S}).tril().ne(zeros({L, S})), scores, -kInf);
  if (c.mask.defined()) scores = c.mask.dtype() == DType::boolean ? where(c.mask, scores, -kInf) : scores + c.mask;
  Tensor probs = softmax(scores, -1);
  if (c.keep.defined()) probs = probs * c.keep.to(probs.dtype()) / (1.0 - c.dropout_p);
  return matmul(probs, v);
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c, Generator* generator = nullptr) {
  AttentionOptions options{.attn_mask = c.mask, .dropout_p = c.dropout_p, .is_causal = c.causal};
  if (c.scale != 0) options.scale = c.scale;
  return scaled_dot_product_attention(q, k, v, options, generator);
}

// Output and input gradients of `f` on fresh leaf copies of `inputs`, for the output gradient `weight`.
struct Run {
  Tensor out;
  TensorList grads;
};
Run run(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs, const Tensor& weight) {
  TensorList leaves;
  for (const Tensor& x : inputs) leaves.push_back(x.detach().clone().requires_grad_());
  Run result{f(leaves), {}};
  result.out.backward(weight.to(result.out.dtype()));
  for (const Tensor& leaf : leaves) result.grads.push_back(leaf.grad());
  return result;
}

Tensor output_weight(const Tensor& q, const Tensor& v) {
  Shape shape = q.sizes();
  shape.back() = v.size(-1);
  return randn(shape, {DType::f64}, &test::rng());
}

// The fused op and the composed one on the same f64 inputs (q, k, v share their batch dims):
// outputs and gradients agree to f64 rounding.
void check_matches_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c,
                            double tolerance = 1e-12) {
  const Tensor weight = output_weight(q, v);
  const Run expected = run([&](const TensorList& in) { return composed(in[0], in[1], in[2], c); }, {q, k, v}, weight);
  const Run got = run([&](const TensorList& in) { return fused(in[0], in[1], in[2], c); }, {q, k, v}, weight);
  CHECK(test::max_abs_diff(got.out, expected.out) < tolerance);
  for (size_t i = 0; i < 3; ++i) {
    INFO("gradient of input ", i);
    CHECK(test::max_abs_diff(got.grads[i], expected.grads[i]) < tolerance);
  }
}

Tensor input(const Shape& shape, DType dtype = DType::f64) {
  return randn(shape, {DType::f64}, &test::rng()).to(dtype);
}

}  // namespace

TEST_CASE("fused attention equals the composed matmul-softmax-matmul in f64, forward and backward") {
  // L and S cross the kernel's 64-row blocks; E != Ev; L < S, L > S.
  for (const auto& [L, S] : {std::pair<int64_t, int64_t>{5, 7}, {130, 70}, {70, 130}, {1, 1}}) {
    for (const bool causal : {false, true}) {
      CAPTURE(L);
      CAPTURE(S);
      CAPTURE(causal);
      check_matches_composed(input({2, 3, L, 4}), input({2, 3, S, 4}), input({2, 3, S, 6}), {.causal = causal});
    }
  }
  check_matches_composed(input({2, 5, 3}), input({2, 4, 3}), input({2, 4, 2}), {.scale = 0.3});  // a given scale
}

TEST_CASE("fused attention takes bool and float masks that broadcast over the batch, rows and columns") {
  const Tensor q = input({2, 3, 6, 4}), k = input({2, 3, 9, 4}), v = input({2, 3, 9, 5});
  Tensor keep = rand({6, 9}, {}, &test::rng()).gt(full({6, 9}, 0.3));
  keep.select(1, 0).fill_(1.0);                     // every row keeps a key (fully masked rows: their own test)
  check_matches_composed(q, k, v, {.mask = keep});  // [L, S]
  check_matches_composed(q, k, v, {.mask = input({2, 1, 6, 9})});  // float [B, 1, L, S]
  check_matches_composed(q, k, v, {.mask = rand({3, 1, 9}, {}, &test::rng()).gt(full({3, 1, 9}, -1.0))});  // [H, 1, S]
  check_matches_composed(q, k, v, {.mask = input({9})});                                                   // float [S]
}

TEST_CASE("fused attention broadcasts the leading dims of q, k and v") {
  const Tensor q = input({2, 3, 5, 4}), k = input({3, 7, 4}), v = input({1, 1, 7, 2});
  const Tensor weight = output_weight(q, v);
  const auto expand = [](const TensorList& in) {
    return TensorList{in[0], in[1].expand({2, 3, 7, 4}), in[2].expand({2, 3, 7, 2})};
  };
  const Run expected = run(
      [&](const TensorList& in) {
        const TensorList e = expand(in);
        return composed(e[0], e[1], e[2], {});
      },
      {q, k, v}, weight);
  const Run got = run([](const TensorList& in) { return fused(in[0], in[1], in[2], {}); }, {q, k, v}, weight);
  CHECK(test::max_abs_diff(got.out, expected.out) < 1e-12);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(got.grads[i].sizes() == expected.grads[i].sizes());
    CHECK(test::max_abs_diff(got.grads[i], expected.grads[i]) < 1e-12);
  }
}

// q, k, v as the heads of one packed projection [B, T, 3 H D], the way a transformer makes them:
// strided views, read by the kernel where they lie.
TensorList heads_of_packed(const Tensor& packed, int64_t heads) {
  const int64_t B = packed.size(0), T = packed.size(1), D = packed.size(2) / (3 * heads);
  const Tensor qkv = packed.reshape({B, T, 3, heads, D}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, D]
  return {qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2)};
}

TEST_CASE("gradcheck: the fused attention, causal or not, on views of one packed projection") {
  const Tensor packed = test::rand_input({2, 5, 3 * 2 * 3});
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    CHECK_GRADCHECK(
        [causal](const TensorList& in) {
          const TensorList qkv = heads_of_packed(in[0], 2);
          CHECK(!qkv[0].is_contiguous());
          return fused(qkv[0], qkv[1], qkv[2], {.causal = causal});
        },
        {packed});
  }
}

TEST_CASE("gradcheck: the fused attention with masks, L != S and Ev != E") {
  const Tensor q = test::rand_input({2, 4, 3}), k = test::rand_input({2, 6, 3}), v = test::rand_input({2, 6, 5});
  const Tensor keep = tensor(std::vector<double>{1, 0, 1, 1, 0, 1}, {1, 6}).gt(full({1, 6}, 0.5));
  const Tensor added = randn({4, 6}, {DType::f64}, &test::rng());
  for (const Tensor& mask : {keep, added}) {
    CAPTURE(mask.dtype());
    CHECK_GRADCHECK([&](const TensorList& in) { return fused(in[0], in[1], in[2], {.mask = mask}); }, {q, k, v});
  }
  CHECK_GRADCHECK([](const TensorList& in) { return fused(in[0], in[1], in[2], {.causal = true}); }, {q, k, v});
  CHECK_GRADCHECK([](const TensorList& in) { return fused(in[1], in[0], in[2].narrow(1, 0, 4), {.causal = true}); },
                  {q, k, v});  // L > S
}

namespace {

// [N, L, H * D] split into heads [N, H, L, D] by a view, as MultiheadAttention splits a projection.
Tensor split_heads(const Tensor& x, int64_t heads) {
  return x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

// The fused op with dropout and the composed one given attention_dropout_mask's keep-mask for the
// same generator state: outputs and gradients agree to f64 rounding, and the op reserved its draws.
// With heads > 0, q, k and v are [N, L, H * D] and the fused op is given their heads' views.
void check_dropout_matches_composed(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double p,
                                    int64_t heads = 0) {
  const auto view = [heads](const Tensor& x) { return heads > 0 ? split_heads(x, heads) : x; };
  Generator generator(1234);
  generator.set_offset(17);
  Shape scores = view(q).sizes();
  scores.back() = k.size(-2);
  const Tensor keep = attention_dropout_mask(scores, p, generator.seed(), generator.offset());
  const double kept = test::values(keep.to(DType::f64).mean())[0];
  CHECK(kept > 1 - p - 0.1);
  CHECK(kept < 1 - p + 0.1);
  const Tensor weight = output_weight(view(q), view(v));
  const Run expected = run(
      [&](const TensorList& in) {
        return composed(view(in[0]).contiguous(), view(in[1]).contiguous(), view(in[2]).contiguous(),
                        {.causal = causal, .keep = keep, .dropout_p = p});
      },
      {q, k, v}, weight);
  const Run got = run(
      [&](const TensorList& in) {
        return fused(view(in[0]), view(in[1]), view(in[2]), {.causal = causal, .dropout_p = p}, &generator);
      },
      {q, k, v}, weight);
  CHECK(generator.offset() == 17 + static_cast<uint64_t>((numel_of(scores) + 3) / 4));
  CHECK(test::max_abs_diff(got.out, expected.out) < 1e-12);
  for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(got.grads[i], expected.grads[i]) < 1e-12);
}

}  // namespace

TEST_CASE("dropout: the fused attention equals the composed one given the same keep-mask, forward and backward") {
  // S = 9: rows start at elements that are no multiple of a Philox block's four words.
  check_dropout_matches_composed(input({2, 3, 70, 4}), input({2, 3, 9, 4}), input({2, 3, 9, 5}), false, 0.3);
}

TEST_CASE("causal dropout over several key blocks draws the keep-mask's bits, on and below the diagonal") {
  // L = S = 150: three key blocks of the CPU kernel, rows that straddle its 64-probability batches
  // of draws, and the keys above the diagonal that it does not draw.
  check_dropout_matches_composed(input({2, 2, 150, 3}), input({2, 2, 150, 3}), input({2, 2, 150, 4}), true, 0.2);
}

TEST_CASE("the backward drops what the forward dropped, on heads' views with L and S no multiples of 64") {
  // The CPU backward reads the forward's bits instead of drawing them again: against the composed op
  // given attention_dropout_mask's mask, on rows of 131 and 70 probabilities (partial words, rows
  // that start mid-block) read through the heads' strides, causal with L != S or not.
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    check_dropout_matches_composed(input({2, 70, 3 * 4}), input({2, 131, 3 * 4}), input({2, 131, 3 * 5}), causal, 0.25,
                                   3);
    check_dropout_matches_composed(input({2, 131, 2 * 3}), input({2, 70, 2 * 3}), input({2, 70, 2 * 2}), causal, 0.25,
                                   2);
  }
}

TEST_CASE("with dropout, a row masked in one batch entry only gives 0 and adds nothing to the gradients of k and v") {
  // The CPU backward reuses its scratch from one matrix to the next: row 1 is masked in the second
  // entry only, so a probability of the first entry's row 1 left in place would reach grad_v there.
  const Tensor q = input({2, 3, 4}), k = input({2, 5, 4}), v = input({2, 5, 3});
  Tensor mask = ones({2, 3, 5}, {DType::boolean});
  mask.select(0, 1).select(0, 1).fill_(0.0);
  const double p = 0.3;
  Generator generator(1234);
  const Tensor keep = attention_dropout_mask({2, 3, 5}, p, generator.seed(), generator.offset());
  const Tensor weight = output_weight(q, v);
  const Run got =
      run([&](const TensorList& in) { return fused(in[0], in[1], in[2], {.mask = mask, .dropout_p = p}, &generator); },
          {q, k, v}, weight);
  CHECK(test::values(got.out.select(0, 1).select(0, 1).abs().sum())[0] == 0.0);
  CHECK(test::values(got.grads[0].select(0, 1).select(0, 1).abs().sum())[0] == 0.0);
  // Entry by entry against the composed op given the same bits, the masked row left out of the second.
  for (const int64_t entry : {0, 1}) {
    CAPTURE(entry);
    const Tensor rows = entry == 0 ? tensor(std::vector<int64_t>{0, 1, 2}) : tensor(std::vector<int64_t>{0, 2});
    const auto of_entry = [&](const Tensor& x) { return x.select(0, entry).index_select(0, rows); };
    const Run expected = run(
        [&](const TensorList& in) {
          return composed(of_entry(in[0]), in[1].select(0, entry), in[2].select(0, entry),
                          {.mask = of_entry(mask), .keep = of_entry(keep), .dropout_p = p});
        },
        {q, k, v}, of_entry(weight));
    CHECK(test::max_abs_diff(of_entry(got.out), expected.out) < 1e-12);
    CHECK(test::max_abs_diff(got.grads[1].select(0, entry), expected.grads[1].select(0, entry)) < 1e-12);
    CHECK(test::max_abs_diff(got.grads[2].select(0, entry), expected.grads[2].select(0, entry)) < 1e-12);
  }
}

TEST_CASE("dropout_p = 1 drops every probability: the output and every gradient are 0, not NaN") {
  const Tensor q = input({2, 3, 70, 4}), k = input({2, 3, 70, 4}), v = input({2, 3, 70, 5});
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    Generator generator(5);
    const Run got = run(
        [&](const TensorList& in) {
          return fused(in[0], in[1], in[2], {.causal = causal, .dropout_p = 1.0}, &generator);
        },
        {q, k, v}, output_weight(q, v));
    CHECK(test::values(got.out.abs().sum())[0] == 0.0);
    for (size_t i = 0; i < 3; ++i) CHECK(test::values(got.grads[i].abs().sum())[0] == 0.0);
  }
}

TEST_CASE("gradcheck: the fused attention with dropout, the same seed for every evaluation") {
  const Tensor q = test::rand_input({2, 5, 3}), k = test::rand_input({2, 6, 3}), v = test::rand_input({2, 6, 4});
  CHECK_GRADCHECK(
      [](const TensorList& in) {
        Generator generator(99);  // the same mask each time gradcheck evaluates
        return fused(in[0], in[1], in[2], {.causal = true, .dropout_p = 0.4}, &generator);
      },
      {q, k, v});
}

TEST_CASE("a fully masked row gives 0 and no gradient, as PyTorch's scaled_dot_product_attention") {
  // torch 2.x: F.scaled_dot_product_attention(q, k, v, attn_mask=m) with row 1 of m all False (or
  // all -inf) returns zeros in that row, and q.grad is zero there (build/torch-venv, checked).
  const Tensor q = input({2, 3, 4}), k = input({2, 5, 4}), v = input({2, 5, 3});
  Tensor keep = ones({3, 5}, {DType::boolean});
  keep.select(0, 1).fill_(0.0);
  Tensor added = zeros({3, 5}, {DType::f64});
  added.select(0, 1).fill_(-kInf);
  for (const Tensor& mask : {keep, added}) {
    CAPTURE(mask.dtype());
    const Tensor weight = output_weight(q, v);
    const Run got =
        run([&](const TensorList& in) { return fused(in[0], in[1], in[2], {.mask = mask}); }, {q, k, v}, weight);
    CHECK(test::values(got.out.select(1, 1).abs().sum())[0] == 0.0);
    CHECK(test::values(got.grads[0].select(1, 1).abs().sum())[0] == 0.0);
    // The other rows are the composed attention of those rows alone.
    const Tensor rows = tensor(std::vector<int64_t>{0, 2});
    const Run expected = run(
        [&](const TensorList& in) {
          return composed(in[0].index_select(1, rows), in[1], in[2], {.mask = mask.index_select(0, rows)});
        },
        {q, k, v}, weight.index_select(1, rows));
    CHECK(test::max_abs_diff(got.out.index_select(1, rows), expected.out) < 1e-12);
    CHECK(test::max_abs_diff(got.grads[1], expected.grads[1]) < 1e-12);
    CHECK(test::max_abs_diff(got.grads[2], expected.grads[2]) < 1e-12);
  }
}

TEST_CASE("f32 fused attention is within 1e-5 of the f64 composed reference at T = 200") {
  const Tensor q = input({2, 2, 200, 32}), k = input({2, 2, 200, 32}), v = input({2, 2, 200, 32});
  const Tensor weight = output_weight(q, v);
  const Run expected =
      run([](const TensorList& in) { return composed(in[0], in[1], in[2], {.causal = true}); }, {q, k, v}, weight);
  const Run got = run([](const TensorList& in) { return fused(in[0], in[1], in[2], {.causal = true}); },
                      {q.to(DType::f32), k.to(DType::f32), v.to(DType::f32)}, weight);
  CHECK(got.out.dtype() == DType::f32);
  CHECK(test::max_abs_diff(got.out.to(DType::f64), expected.out) < 1e-5);
  for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(got.grads[i].to(DType::f64), expected.grads[i]) < 1e-4);
}

TEST_CASE("f16 and bf16 fused attention accumulate in f32 and round once") {
  // Against f32 on the same (16-bit) values: the difference is the rounding of the result, about
  // 2^-11 (f16) or 2^-8 (bf16) of |out| <= 3, plus that of 16-bit intermediate gradients.
  for (const auto& [dtype, tolerance] : {std::pair<DType, double>{DType::f16, 4e-3}, {DType::bf16, 3e-2}}) {
    CAPTURE(dtype);
    const Tensor q = input({2, 2, 80, 16}, dtype), k = input({2, 2, 80, 16}, dtype), v = input({2, 2, 80, 16}, dtype);
    const Tensor weight = output_weight(q, v).to(dtype);
    const auto f = [](const TensorList& in) { return fused(in[0], in[1], in[2], {.causal = true}); };
    const Run low = run(f, {q, k, v}, weight);
    const Run wide = run(f, {q.to(DType::f32), k.to(DType::f32), v.to(DType::f32)}, weight.to(DType::f32));
    CHECK(low.out.dtype() == dtype);
    CHECK(test::max_abs_diff(low.out.to(DType::f32), wide.out) < tolerance);
    for (size_t i = 0; i < 3; ++i)
      CHECK(test::max_abs_diff(low.grads[i].to(DType::f32), wide.grads[i]) < 4 * tolerance);
  }
}

TEST_CASE("the fused attention gives the same bits on 1 and 2 threads") {
  const Tensor q = input({3, 2, 150, 16}, DType::f32), k = input({3, 2, 150, 16}, DType::f32),
               v = input({3, 2, 150, 16}, DType::f32);
  const Tensor weight = output_weight(q, v);
  const auto f = [](const TensorList& in) { return fused(in[0], in[1], in[2], {.causal = true}); };
  Run one, two;
  {
    test::NumThreadsGuard threads(1);
    one = run(f, {q, k, v}, weight);
  }
  {
    test::NumThreadsGuard threads(2);
    two = run(f, {q, k, v}, weight);
  }
  CHECK(test::max_abs_diff(one.out, two.out) == 0.0);
  for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(one.grads[i], two.grads[i]) == 0.0);
}

TEST_CASE(
    "on split-head views the output and the gradients come in the heads' layout, with the values of contiguous heads") {
  // Note [Attention in the layout of its inputs]: out and grad_q, grad_k, grad_v are [N, L, H, D]
  // in memory, so merging the heads and the backward of the split are views. L = 70 crosses the
  // kernel's 64-row blocks; f32 hands the strided rows to BLAS, bf16 converts them. The tolerance
  // is the rounding of each dtype (BLAS may sum in another order for another leading dimension).
  for (const auto& [dtype, tolerance] :
       {std::pair<DType, double>{DType::f64, 1e-12}, {DType::f32, 1e-5}, {DType::bf16, 3e-2}}) {
    for (const int threads : {1, 2}) {
      for (const bool causal : {false, true}) {
        CAPTURE(dtype);
        CAPTURE(threads);
        CAPTURE(causal);
        test::NumThreadsGuard guard(threads);
        const Tensor q = input({2, 70, 3 * 5}, dtype), k = input({2, 70, 3 * 5}, dtype),
                     v = input({2, 70, 3 * 4}, dtype);
        const Tensor weight = randn({2, 3, 70, 4}, {DType::f64}, &test::rng()).to(dtype);
        Shape grad_layouts_ok;
        const Run split = run(
            [&](const TensorList& in) {
              TensorList heads;
              for (const Tensor& x : in) {
                heads.push_back(split_heads(x, 3));
                heads.back().register_hook([&](const Tensor& grad) {
                  grad_layouts_ok.push_back(grad.permute({0, 2, 1, 3}).is_contiguous());
                  return Tensor();
                });
              }
              return fused(heads[0], heads[1], heads[2], {.causal = causal});
            },
            {q, k, v}, weight);
        const Run dense = run(
            [&](const TensorList& in) {
              return fused(split_heads(in[0], 3).contiguous(), split_heads(in[1], 3).contiguous(),
                           split_heads(in[2], 3).contiguous(), {.causal = causal});
            },
            {q, k, v}, weight);
        CHECK(split.out.permute({0, 2, 1, 3}).is_contiguous());
        CHECK(dense.out.is_contiguous());
        CHECK(grad_layouts_ok == Shape{1, 1, 1});
        CHECK(test::max_abs_diff(split.out, dense.out) < tolerance);
        for (size_t i = 0; i < 3; ++i) {
          INFO("gradient of input ", i);
          CHECK(test::max_abs_diff(split.grads[i], dense.grads[i]) < 4 * tolerance);
        }
      }
    }
  }
}

TEST_CASE("fused attention errors name both shapes") {
  const Tensor q = input({2, 3, 4}), k = input({2, 5, 4}), v = input({2, 5, 6});
  CHECK_THROWS_WITH_AS(
      fused(q, input({2, 5, 3}), v, {}),
      doctest::Contains("query of shape [2, 3, 4] and key of shape [2, 5, 3] differ in their last dim (E)"), Error);
  CHECK_THROWS_WITH_AS(
      fused(q, k, input({2, 4, 6}), {}),
      doctest::Contains("key of shape [2, 5, 4] and value of shape [2, 4, 6] differ in their sequence dim (S)"), Error);
  CHECK_THROWS_WITH_AS(fused(q, k, v, {.mask = ones({3, 4}, {DType::boolean})}),
                       doctest::Contains("attn_mask of shape [3, 4] does not broadcast to the scores' shape [2, 3, 5]"),
                       Error);
  CHECK_THROWS_WITH_AS(fused(q, k, v, {.mask = ones({3, 5}, {DType::boolean}), .causal = true}),
                       doctest::Contains("is_causal"), Error);
  CHECK_THROWS_WITH_AS(fused(q, k, v, {.mask = ones({3, 5}, {DType::f32})}),
                       doctest::Contains("attn_mask must be bool or f64 (the query's dtype), got f32"), Error);
  CHECK_THROWS_WITH_AS(fused(q, k.to(DType::f32), v, {}), doctest::Contains("one floating dtype"), Error);
  CHECK_THROWS_WITH_AS(fused(q, input({3, 5, 4}), input({3, 5, 6}), {}),
                       doctest::Contains("scaled_dot_product_attention"), Error);
}

TEST_CASE("a mask modified in place between forward and backward is refused, as any saved tensor") {
  const Tensor q = test::rand_input({2, 3, 4}), k = test::rand_input({2, 5, 4}), v = test::rand_input({2, 5, 4});
  Tensor mask = zeros({3, 5}, {DType::f64});
  const Tensor out = fused(q, k, v, {.mask = mask});
  mask.fill_(1.0);
  CHECK_THROWS_WITH_AS(out.sum().backward(), doctest::Contains("modified by an in-place operation"), Error);
}
