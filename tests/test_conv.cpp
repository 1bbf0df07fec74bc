// Convolution and pooling: hand-computed outputs (checked against PyTorch 1.13), the im2col + GEMM
// convolution (f64 runs on it) against a direct convolution written out below on odd shapes and
// strided inputs, the oneDNN path (f32, bf16) against the im2col reference, the pooling kernels
// against direct references, gradchecks of every op and option, thread-count independence and
// run-to-run determinism, the layers (nn::Conv2d and the pooling modules), and the errors.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/cpu/conv_kernels.h"  // defines: the oneDNN path, the reference and ConvPass, compared here
#include "core/kernels/conv.h"
#include "helpers.h"

using namespace sg;

namespace {

struct ConvArgs {
  Size2 stride, padding, dilation;
  int64_t groups;
};

// Calls tap(n, k, channel, p, q, c, r, s, ih, iw) for every product of conv2d's definition:
// out[n, k, p, q] += w[k, c, r, s] * x[n, channel, ih, iw] with channel = group(k) C/G + c,
// ih = p stride.h - padding.h + r dilation.h (iw likewise), skipping taps outside the image.
template <typename Tap>
void for_each_conv_tap(const Shape& x, const Shape& w, const Shape& out, const ConvArgs& a, const Tap& tap) {
  const int64_t K = w[0], Cg = w[1];
  for (int64_t n = 0; n < x[0]; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < out[2]; ++p)
        for (int64_t q = 0; q < out[3]; ++q)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < w[2]; ++r)
              for (int64_t s = 0; s < w[3]; ++s) {
                const int64_t ih = p * a.stride.h - a.padding.h + r * a.dilation.h;
                const int64_t iw = q * a.stride.w - a.padding.w + s * a.dilation.w;
                if (ih < 0 || ih >= x[2] || iw < 0 || iw >= x[3]) continue;
                tap(n, k, k / (K / a.groups) * Cg + c, p, q, c, r, s, ih, iw);
              }
}

Shape conv_out_shape(const Shape& x, const Shape& w, const ConvArgs& a) {
  return {x[0], w[0], (x[2] + 2 * a.padding.h - a.dilation.h * (w[2] - 1) - 1) / a.stride.h + 1,
          (x[3] + 2 * a.padding.w - a.dilation.w * (w[3] - 1) - 1) / a.stride.w + 1};
}

// Row-major offset of index `i` in `shape` (4-D).
int64_t at4(const Shape& shape, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return ((i0 * shape[1] + i1) * shape[2] + i2) * shape[3] + i3;
}

// conv2d written as its definition, in f64, one product at a time.
Tensor reference_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Size2 stride, Size2 padding, Size2 dilation,
                        int64_t groups) {
  const ConvArgs a{stride, padding, dilation, groups};
  const std::vector<double> xv = test::values(x), wv = test::values(w);
  const std::vector<double> bv = b.defined() ? test::values(b) : std::vector<double>(w.size(0), 0.0);
  const Shape out_shape = conv_out_shape(x.sizes(), w.sizes(), a);
  std::vector<double> out(numel_of(out_shape));
  for (int64_t i = 0; i < numel_of(out_shape); ++i) out[i] = bv[i / (out_shape[2] * out_shape[3]) % out_shape[1]];
  for_each_conv_tap(x.sizes(), w.sizes(), out_shape, a,
                    [&](auto n, auto k, auto channel, auto p, auto q, auto c, auto r, auto s, auto ih, auto iw) {
                      out[at4(out_shape, n, k, p, q)] +=
                          wv[at4(w.sizes(), k, c, r, s)] * xv[at4(x.sizes(), n, channel, ih, iw)];
                    });
  return tensor(out, out_shape);
}

// The gradients of sum(g * conv2d(x, w)) by the same products: d x[n, channel, ih, iw] += w * g and
// d w[k, c, r, s] += x * g.
std::pair<Tensor, Tensor> reference_conv2d_grads(const Tensor& x, const Tensor& w, const Tensor& g, const ConvArgs& a) {
  const std::vector<double> xv = test::values(x), wv = test::values(w), gv = test::values(g);
  std::vector<double> grad_x(x.numel()), grad_w(w.numel());
  for_each_conv_tap(x.sizes(), w.sizes(), g.sizes(), a,
                    [&](auto n, auto k, auto channel, auto p, auto q, auto c, auto r, auto s, auto ih, auto iw) {
                      const double grad = gv[at4(g.sizes(), n, k, p, q)];
                      grad_x[at4(x.sizes(), n, channel, ih, iw)] += wv[at4(w.sizes(), k, c, r, s)] * grad;
                      grad_w[at4(w.sizes(), k, c, r, s)] += xv[at4(x.sizes(), n, channel, ih, iw)] * grad;
                    });
  return {tensor(grad_x, x.sizes()), tensor(grad_w, w.sizes())};
}

// Pooling written as its definition: out[n, c, p, q] = reduce of the taps of window (p, q) inside the image.
// max: the largest tap and its index ih W + iw (the first on ties); avg: as PyTorch's avg_pool2d counts.
struct ReferencePool {
  std::vector<double> values;
  std::vector<double> indices;
};
ReferencePool reference_pool(const Tensor& x, bool is_max, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
                             bool ceil_mode, bool count_include_pad) {
  const std::vector<double> xv = test::values(x);
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const auto out_size = [&](int64_t size, int64_t k, int64_t s, int64_t pad, int64_t d) {
    const double exact = static_cast<double>(size + 2 * pad - d * (k - 1) - 1) / static_cast<double>(s);
    int64_t n = static_cast<int64_t>(ceil_mode ? std::ceil(exact) : std::floor(exact)) + 1;
    if (ceil_mode && (n - 1) * s >= size + pad) --n;  // the last window must start inside the image or left padding
    return n;
  };
  const int64_t P = out_size(H, kernel.h, stride.h, padding.h, dilation.h);
  const int64_t Q = out_size(W, kernel.w, stride.w, padding.w, dilation.w);
  ReferencePool result;
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t best_index = -1, inside = 0, counted = 0;
        for (int64_t i = 0; i < kernel.h; ++i)
          for (int64_t j = 0; j < kernel.w; ++j) {
            const int64_t ih = p * stride.h - padding.h + i * dilation.h;
            const int64_t iw = q * stride.w - padding.w + j * dilation.w;
            if (ih < H + padding.h && iw < W + padding.w) ++counted;  // padding counts, beyond it never
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = xv[(plane * H + ih) * W + iw];
            ++inside;
            sum += v;
            if (v > best) {
              best = v;
              best_index = ih * W + iw;
            }
          }
        result.values.push_back(is_max ? best
                                       : (inside == 0 ? 0.0 : sum / double(count_include_pad ? counted : inside)));
        result.indices.push_back(static_cast<double>(best_index));
      }
  return result;
}

// A [N, C, H, W] f64 leaf whose values are distinct and at least 0.01 apart (a shuffled ramp), so a
// finite-difference step never changes which tap is a window's maximum.
Tensor distinct_input(const Shape& shape) {
  const int64_t n = numel_of(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.01 * static_cast<double>((i * 7919) % n) - 0.005 * static_cast<double>(n);
  return tensor(v, shape).requires_grad_();
}

Tensor randn_of(const Shape& shape, DType dtype = DType::f64) { return randn(shape, {dtype}, &test::rng()); }

// Sums of a few dozen f64 products of values ~N(0, 1): the two orders of summation differ by ~1e-15.
constexpr double kF64Tolerance = 1e-12;

struct ConvCase {
  Shape input, weight;
  Size2 stride, padding, dilation;
  int64_t groups;
};

// Covers every path of the kernel: unit and non-unit strides, padding on both sides, dilation, groups,
// a kernel wider than tall, and the pointwise 1x1 kernel whose col is the image itself.
const std::vector<ConvCase>& odd_cases() {
  static const std::vector<ConvCase> cases{
      {{2, 3, 7, 5}, {6, 3, 3, 2}, {2, 1}, {1, 2}, {2, 1}, 1},
      {{2, 3, 7, 5}, {6, 1, 3, 2}, {2, 1}, {1, 2}, {2, 1}, 3},
      {{3, 4, 6, 9}, {5, 4, 2, 3}, {1, 3}, {0, 1}, {1, 2}, 1},
      {{2, 6, 5, 4}, {4, 3, 1, 1}, 1, 0, 1, 2},
      {{1, 2, 4, 4}, {3, 2, 1, 1}, 2, 0, 1, 1},
      {{2, 3, 3, 3}, {4, 3, 3, 3}, 1, 0, 1, 1},  // a 1 x 1 output: matrices of one column
  };
  return cases;
}

}  // namespace

// ---- convolution ----

TEST_CASE("conv2d of a small image equals the hand-computed result") {
  const Tensor x = arange(1, 10, 1, {DType::f64}).reshape({1, 1, 3, 3});
  const Tensor w = tensor(std::vector<double>{1, 2, 3, 4}, {1, 1, 2, 2});
  CHECK(test::values(conv2d(x, w, tensor(std::vector<double>{1}))) == std::vector<double>{38, 48, 68, 78});
  CHECK(test::values(conv2d(x, w, Tensor(), /*stride=*/2, /*padding=*/1)) == std::vector<double>{4, 18, 36, 77});
}

TEST_CASE("conv2d matches a direct convolution on odd shapes, strides, padding, dilation and groups") {
  for (const ConvCase& c : odd_cases()) {
    for (bool with_bias : {true, false}) {
      const Tensor x = randn_of(c.input), w = randn_of(c.weight);
      const Tensor b = with_bias ? randn_of({c.weight[0]}) : Tensor();
      INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups, " bias ", with_bias);
      const Tensor out = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      const Tensor expected = reference_conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      REQUIRE(out.sizes() == expected.sizes());
      CHECK(test::max_abs_diff(out, expected) <= kF64Tolerance);
    }
  }
}

TEST_CASE("conv2d in f32 matches the f64 direct convolution") {
  const ConvCase& c = odd_cases()[1];
  const Tensor x = randn_of(c.input, DType::f32), w = randn_of(c.weight, DType::f32), b = randn_of({6}, DType::f32);
  const Tensor out = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  CHECK(out.dtype() == DType::f32);
  // At most 6 products of values ~N(0, 1) per output: f32 rounding stays far below 1e-5.
  CHECK(test::max_abs_diff(out, reference_conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups)) <= 1e-5);
}

TEST_CASE("conv2d in f16 and bf16 is the f32 convolution rounded once") {
  const Tensor x = randn_of({2, 4, 6, 5}, DType::f32), w = randn_of({3, 4, 3, 3}, DType::f32);
  for (DType dtype : {DType::f16, DType::bf16}) {
    const Tensor x16 = x.to(dtype), w16 = w.to(dtype);
    const Tensor out = conv2d(x16, w16, Tensor(), 1, 1);
    CHECK(out.dtype() == dtype);
    CHECK(test::values(out) == test::values(conv2d(x16.to(DType::f32), w16.to(DType::f32), Tensor(), 1, 1).to(dtype)));
  }
}

TEST_CASE("conv2d reads non-contiguous input and weight views") {
  const ConvCase& c = odd_cases()[1];
  // x as a permuted view of an NHWC tensor; w with its kernel dims transposed.
  const Tensor x = randn_of({c.input[0], c.input[2], c.input[3], c.input[1]}).permute({0, 3, 1, 2});
  const Tensor w = randn_of({c.weight[0], c.weight[1], c.weight[3], c.weight[2]}).transpose(2, 3);
  REQUIRE_FALSE(x.is_contiguous());
  REQUIRE_FALSE(w.is_contiguous());
  const Tensor out = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
  CHECK(test::max_abs_diff(out, reference_conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups)) <=
        kF64Tolerance);
}

TEST_CASE("conv2d of an unbatched [C, H, W] input has no batch dim") {
  const Tensor x = randn_of({3, 5, 5}), w = randn_of({2, 3, 3, 3});
  const Tensor out = conv2d(x, w, Tensor(), 1, 1);
  CHECK(out.sizes() == Shape{2, 5, 5});
  CHECK(test::max_abs_diff(out, conv2d(x.unsqueeze(0), w, Tensor(), 1, 1)[0]) == 0.0);
}

TEST_CASE("conv2d gradients for input, weight and bias pass gradcheck") {
  // N = 5 spans two blocks of the weight gradient's fixed image blocks (Note [Deterministic weight gradient]).
  for (const ConvCase& c : std::vector<ConvCase>{
           {{5, 4, 5, 4}, {4, 2, 3, 2}, {2, 1}, {1, 1}, {1, 2}, 2},
           {{2, 3, 4, 5}, {2, 3, 2, 2}, {1, 2}, {0, 1}, 1, 1},
           {{2, 4, 3, 3}, {6, 2, 1, 1}, 1, 0, 1, 2},
           {{2, 3, 3, 3}, {2, 3, 3, 3}, 1, 0, 1, 1},
       }) {
    INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight));
    const Tensor x = test::rand_input(c.input), w = test::rand_input(c.weight), b = test::rand_input({c.weight[0]});
    CHECK_GRADCHECK(
        [&](const TensorList& in) { return conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups); },
        {x, w, b});
  }
}

TEST_CASE("conv2d gradients reach a non-contiguous input and flow without a bias") {
  const Tensor x = test::noncontiguous_input({2, 2, 4, 5}), w = test::rand_input({3, 2, 2, 3});
  CHECK_GRADCHECK([](const TensorList& in) { return conv2d(in[0], in[1], Tensor(), 1, {1, 0}); }, {x, w});
}

TEST_CASE("conv2d unfolds a large image in bands of output rows and still matches direct sums") {
  // An f64 col above 1 MB per image is split into bands (Note [Bands of output rows] in core/cpu/conv.cpp):
  // 16 channels x 3 x 3 taps x 36 columns x 8 bytes = 41 KB per output row, so 40 rows make two bands.
  for (const auto& [x_shape, w_shape, args] : std::vector<std::tuple<Shape, Shape, ConvArgs>>{
           {{2, 16, 40, 36}, {4, 16, 3, 3}, {1, 1, 1, 1}}, {{1, 64, 40, 36}, {8, 32, 3, 3}, {2, {1, 2}, 1, 2}}}) {
    INFO("input ", shape_str(x_shape), " weight ", shape_str(w_shape));
    const Tensor x = randn_of(x_shape).requires_grad_(), w = randn_of(w_shape).requires_grad_();
    const Tensor out = conv2d(x, w, Tensor(), args.stride, args.padding, args.dilation, args.groups);
    const Tensor g = randn_of(out.sizes());
    out.backward(g);
    const auto [grad_x, grad_w] = reference_conv2d_grads(x, w, g, args);
    // Sums of up to ~14000 products of N(0, 1) values: f64 rounding differences stay below 1e-10.
    CHECK(test::max_abs_diff(
              out, reference_conv2d(x, w, Tensor(), args.stride, args.padding, args.dilation, args.groups)) <= 1e-10);
    CHECK(test::max_abs_diff(x.grad(), grad_x) <= 1e-10);
    CHECK(test::max_abs_diff(w.grad(), grad_w) <= 1e-10);
  }
}

namespace {

// conv2d forward and backward at `threads` threads: the output and the three gradients.
std::vector<std::vector<double>> conv2d_results(Tensor& x, Tensor& w, Tensor& b, const Tensor& g, int64_t groups,
                                                int threads) {
  test::NumThreadsGuard guard(threads);
  x.mutable_grad() = Tensor();
  w.mutable_grad() = Tensor();
  b.mutable_grad() = Tensor();
  const Tensor out = conv2d(x, w, b, 1, 1, 1, groups);
  out.backward(g);
  return {test::values(out), test::values(x.grad()), test::values(w.grad()), test::values(b.grad())};
}

}  // namespace

TEST_CASE("conv2d over a batch is bit-identical on 1 and 2 threads") {
  // 10 images, enough work for two threads. In f32 all three passes run oneDNN's blocked kernels
  // here, whose split of the work did not change a single bit between 1 and 2 threads (Note [oneDNN
  // and determinism] in core/cpu/conv_onednn.cpp; the next test checks the reference's split).
  Tensor x = randn_of({10, 16, 16, 15}, DType::f32).requires_grad_();
  Tensor w = randn_of({16, 8, 3, 3}, DType::f32).requires_grad_();
  Tensor b = randn_of({16}, DType::f32).requires_grad_();
  const Tensor g = randn_of({10, 16, 16, 15}, DType::f32);
  CHECK(conv2d_results(x, w, b, g, 2, 1) == conv2d_results(x, w, b, g, 2, 2));
}

TEST_CASE("the im2col reference's weight gradient over a batch is bit-identical on 1 and 2 threads") {
  // Our own split of the batch (three weight-gradient blocks of 4, 4 and 2 images, 1 + 2 across the
  // threads; Note [Deterministic weight gradient] in core/cpu/conv.cpp) must not change a single bit.
  const Tensor x = randn_of({10, 16, 16, 15}, DType::f32), g = randn_of({10, 16, 16, 15}, DType::f32);
  const auto grad_weight = [&](int threads) {
    test::NumThreadsGuard guard(threads);
    const Tensor result = empty({16, 8, 3, 3}, {DType::f32});
    cpu::conv2d_grad_weight_reference(result, g, x, {1, 1, 1, 2});
    return test::values(result);
  };
  CHECK(grad_weight(1) == grad_weight(2));
}

TEST_CASE("conv2d of one large image: bit-identical at a given thread count, close across counts") {
  // One image, so no split of the batch: each pass's kernel (oneDNN's in f32; a single OpenBLAS
  // GEMM in the im2col reference) spreads that image over the threads. Its result may depend on
  // the thread count (the GEMM's did on AMD EPYC / Zen 2: 5e-5 apart), though never from run to
  // run — which is what docs/tensor.md promises: same thread count, same bits.
  Tensor x = randn_of({1, 64, 32, 32}, DType::f32).requires_grad_();
  Tensor w = randn_of({64, 64, 3, 3}, DType::f32).requires_grad_();
  Tensor b = randn_of({64}, DType::f32).requires_grad_();
  const Tensor g = randn_of({1, 64, 32, 32}, DType::f32);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    CHECK(conv2d_results(x, w, b, g, 1, threads) == conv2d_results(x, w, b, g, 1, threads));
  }
  const auto one = conv2d_results(x, w, b, g, 1, 1), two = conv2d_results(x, w, b, g, 1, 2);
  for (size_t i = 0; i < one.size(); ++i)
    for (size_t j = 0; j < one[i].size(); ++j)
      // f32 sums of 576 products of N(0, 1) values (typically ~25 in size): a different order of
      // summation moves them by ~1e-4 at most.
      REQUIRE(std::abs(one[i][j] - two[i][j]) <= 1e-3);
}

TEST_CASE("conv2d names the op and the shapes in its errors") {
  const Tensor x = randn_of({2, 3, 8, 8});
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 2, 3, 3})),
                       "conv2d: weight [4, 2, 3, 3] with groups=1 expects in_channels * groups = 2 input channels, "
                       "but the input [2, 3, 8, 8] has 3",
                       Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 1, 3, 3}), Tensor(), 1, 0, 1, 3),
                       doctest::Contains("has 4 output channels, which groups=3 does not divide"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 3, 3, 3}), randn_of({3})),
                       "conv2d: expected a bias of shape [4] for weight [4, 3, 3, 3], got [3]", Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 3, 9, 9})), doctest::Contains("is smaller than the kernel"), Error);
  CHECK_THROWS_WITH_AS(conv2d(randn_of({3, 8}), randn_of({4, 3, 3, 3})),
                       doctest::Contains("4-D [N, C, H, W] (batched) input, got shape [3, 8]"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 3, 3})), doctest::Contains("expected a 4-D weight"), Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 3, 3, 3}, DType::f32)), "conv2d: weight is f32 but the input is f64",
                       Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 3, 3, 3}), Tensor(), 0), "conv2d: stride must be positive, got (0, 0)",
                       Error);
  CHECK_THROWS_WITH_AS(conv2d(x, randn_of({4, 3, 3, 3}), Tensor(), 1, {0, -1}), doctest::Contains("padding"), Error);
}

// ---- the fast path (oneDNN) against the im2col + GEMM reference ----

namespace {

// Shapes on which oneDNN runs at least one pass (Note [When oneDNN runs] in core/cpu/conv_onednn.cpp):
// batch 1 and larger, one input channel (the CNN's first layer), channel counts that fill oneDNN's
// 8-channel blocks and counts that do not, strides, padding on both sides, dilation, groups,
// depthwise, and a 7x7 stride-2 stem with 3 input channels.
const std::vector<ConvCase>& fast_path_cases() {
  static const std::vector<ConvCase> cases{
      {{1, 16, 7, 5}, {24, 16, 3, 2}, {2, 1}, 1, {2, 1}, 1},
      {{1, 16, 7, 6}, {24, 16, 3, 2}, 1, 1, {2, 1}, 1},
      {{2, 1, 12, 12}, {8, 1, 5, 5}, 1, 2, 1, 1},
      {{3, 12, 10, 9}, {20, 12, 3, 3}, 1, 1, 1, 1},
      {{2, 16, 11, 10}, {32, 16, 3, 3}, 2, 1, 1, 1},
      {{2, 16, 12, 12}, {16, 8, 3, 3}, 1, 2, 2, 2},
      {{2, 32, 9, 8}, {32, 16, 3, 3}, {1, 2}, 1, 1, 2},
      {{2, 8, 9, 7}, {8, 1, 3, 3}, {2, 1}, 1, 1, 8},
      {{2, 3, 17, 17}, {8, 3, 7, 7}, 2, 3, 1, 1},
      {{4, 16, 15, 13}, {24, 16, 3, 3}, 1, 1, 1, 1},  // 64 Winograd tiles of 4 x 4 outputs, the last ones cut
  };
  return cases;
}

constexpr std::array<cpu::ConvPass, 3> kConvPasses{cpu::ConvPass::forward, cpu::ConvPass::grad_input,
                                                   cpu::ConvPass::grad_weight};

bool runs_on_onednn(cpu::ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                    const Conv2dParams& params) {
  return cpu::conv2d_implementation(pass, input, weight, dtype, params).rfind("oneDNN ", 0) == 0;
}

struct ConvPassResults {
  Tensor out, grad_input, grad_weight;
};

// The three CPU kernels on the same tensors: cpu::conv2d, ... (oneDNN where it runs) or the im2col
// reference, each into a fresh contiguous output.
ConvPassResults run_conv_passes(bool reference, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g,
                                const Conv2dParams& params) {
  ConvPassResults r{empty(g.sizes(), {g.dtype()}), empty(x.sizes(), {x.dtype()}), empty(w.sizes(), {w.dtype()})};
  if (reference) {
    cpu::conv2d_reference(r.out, x, w, b, params);
    cpu::conv2d_grad_input_reference(r.grad_input, g, w, params);
    cpu::conv2d_grad_weight_reference(r.grad_weight, g, x, params);
  } else {
    cpu::conv2d(r.out, x, w, b, params);
    cpu::conv2d_grad_input(r.grad_input, g, w, params);
    cpu::conv2d_grad_weight(r.grad_weight, g, x, params);
  }
  return r;
}

// max |actual - expected| as a fraction of the largest |expected| (at least 1).
double relative_diff(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> v = test::values(expected);
  double largest = 1.0;
  for (double e : v) largest = std::max(largest, std::abs(e));
  return test::max_abs_diff(actual, expected) / largest;
}

// Checks the three passes of cpu:: against the reference, `tolerance` relative to each result's
// largest value.
void check_against_reference(const Conv2dParams& params, const Tensor& x, const Tensor& w, const Tensor& b,
                             const Tensor& g, double tolerance) {
  const ConvPassResults fast = run_conv_passes(false, x, w, b, g, params);
  const ConvPassResults reference = run_conv_passes(true, x, w, b, g, params);
  CHECK(fast.out.dtype() == x.dtype());
  CHECK(relative_diff(fast.out, reference.out) <= tolerance);
  CHECK(relative_diff(fast.grad_input, reference.grad_input) <= tolerance);
  CHECK(relative_diff(fast.grad_weight, reference.grad_weight) <= tolerance);
}

// check_against_reference, and that oneDNN runs at least one of the passes (else the case tests nothing).
void check_fast_path(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g,
                     double tolerance) {
  const Conv2dParams params{c.stride, c.padding, c.dilation, c.groups};
  CHECK(std::any_of(kConvPasses.begin(), kConvPasses.end(),
                    [&](cpu::ConvPass pass) { return runs_on_onednn(pass, c.input, c.weight, x.dtype(), params); }));
  check_against_reference(params, x, w, b, g, tolerance);
}

Shape out_shape_of(const ConvCase& c) {
  return conv_out_shape(c.input, c.weight, {c.stride, c.padding, c.dilation, c.groups});
}

}  // namespace

TEST_CASE("conv2d runs oneDNN's blocked kernels where they pay off and the im2col reference elsewhere") {
  // The rule of Note [When oneDNN runs] in core/cpu/conv_onednn.cpp, as forward / grad_input / grad_weight.
  struct Expected {
    Shape input, weight;
    Conv2dParams params;
    std::array<bool, 3> onednn;
  };
  for (const Expected& e : std::vector<Expected>{
           {{2, 32, 14, 14}, {64, 32, 5, 5}, {1, 2, 1, 1}, {true, true, true}},
           {{2, 1, 28, 28}, {32, 1, 5, 5}, {1, 2, 1, 1}, {true, false, false}},      // one input channel
           {{1, 3, 32, 32}, {16, 3, 7, 7}, {2, 3, 1, 1}, {true, false, true}},       // a stem's 3 channels
           {{2, 64, 14, 14}, {64, 64, 3, 3}, {1, 1, 1, 1}, {true, true, false}},     // 64 x 64 channels and more
           {{2, 64, 8, 8}, {128, 64, 1, 1}, {2, 0, 1, 1}, {false, false, false}},    // 1x1
           {{2, 32, 8, 8}, {32, 1, 3, 3}, {1, 1, 1, 32}, {true, true, true}},        // depthwise
           {{1, 12, 6, 5}, {9, 4, 2, 3}, {1, 0, 1, 3}, {false, false, false}},       // odd group sizes
           {{16, 512, 2, 2}, {512, 512, 3, 3}, {1, 1, 1, 1}, {false, true, false}},  // 2x2 outputs: folded
           {{16, 256, 4, 4}, {256, 256, 3, 3}, {1, 1, 1, 1}, {true, true, false}},   // 4x4 outputs
       }) {
    INFO("input ", shape_str(e.input), " weight ", shape_str(e.weight), " groups ", e.params.groups);
    for (size_t pass = 0; pass < kConvPasses.size(); ++pass) {
      CAPTURE(pass);
      CHECK(runs_on_onednn(kConvPasses[pass], e.input, e.weight, DType::f32, e.params) == e.onednn[pass]);
    }
  }
}

TEST_CASE("conv2d runs Winograd on 3x3 stride-1 convolutions with enough output tiles where the CPU has it") {
  // Note [When oneDNN runs]: oneDNN's Winograd kernels are AVX-512 only; elsewhere the direct kernels run.
  const auto winograd = [](const Shape& input, const Shape& weight, const Conv2dParams& params) {
    std::vector<bool> passes;
    for (cpu::ConvPass pass : kConvPasses)
      passes.push_back(cpu::conv2d_implementation(pass, input, weight, DType::f32, params).find("wino") !=
                       std::string::npos);
    return passes;
  };
  const bool has_winograd = __builtin_cpu_supports("avx512f");
  const std::vector<bool> all(3, has_winograd), none(3, false);
  const Conv2dParams unit{1, 1, 1, 1};
  CHECK(winograd({4, 16, 15, 13}, {24, 16, 3, 3}, unit) == all);           // 4 x 4 x 4 tiles
  CHECK(winograd({4, 256, 14, 14}, {256, 256, 3, 3}, unit) == all);        // ResNet34's third stage at batch 4
  CHECK(winograd({4, 512, 7, 7}, {512, 512, 3, 3}, unit) == none);         // 4 x 2 x 2 tiles: too few
  CHECK(winograd({4, 16, 16, 16}, {24, 16, 3, 3}, {2, 1, 1, 1}) == none);  // stride 2
  CHECK(winograd({4, 16, 16, 16}, {24, 16, 5, 5}, {1, 2, 1, 1}) == none);  // 5x5
  CHECK(winograd({4, 16, 16, 16}, {24, 8, 3, 3}, {1, 1, 1, 2}) == none);   // grouped
  CHECK(winograd({4, 16, 16, 16}, {24, 16, 3, 3}, {1, 2, 2, 1}) == none);  // dilated
}

TEST_CASE("conv2d's fast path matches the im2col reference in f32 in all three passes") {
  for (const ConvCase& c : fast_path_cases()) {
    for (bool with_bias : {true, false}) {
      INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups, " bias ", with_bias);
      const Tensor x = randn_of(c.input, DType::f32), w = randn_of(c.weight, DType::f32);
      const Tensor b = with_bias ? randn_of({c.weight[0]}, DType::f32) : Tensor();
      // Two f32 sums of the same products (at most ~300 per value here, of N(0, 1) values) in
      // different orders: a few roundings of the sum's size apart, < 1e-6 of the largest value measured.
      check_fast_path(c, x, w, b, randn_of(out_shape_of(c), DType::f32), 1e-5);
    }
  }
}

TEST_CASE("conv2d's Winograd path matches the im2col reference in f32 on a ResNet34 stage with 256 channels") {
  // 2304 products per value: Winograd's transforms land between 1e-6 and 1e-5 of the largest value here.
  const ConvCase c{{4, 256, 14, 14}, {256, 256, 3, 3}, 1, 1, 1, 1};
  const Tensor g = randn_of(out_shape_of(c), DType::f32);
  check_fast_path(c, randn_of(c.input, DType::f32), randn_of(c.weight, DType::f32), Tensor(), g, 1e-5);
}

TEST_CASE("conv2d's fast path matches the im2col reference in bf16 in all three passes") {
  for (const ConvCase& c : fast_path_cases()) {
    INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups);
    const Tensor x = randn_of(c.input, DType::bf16), w = randn_of(c.weight, DType::bf16);
    // Both paths compute in f32 and round once to bf16; f32 results a few roundings apart can round
    // to neighbouring bf16 values: one bf16 step, 2^-7 of the largest value at most.
    check_fast_path(c, x, w, randn_of({c.weight[0]}, DType::bf16), randn_of(out_shape_of(c), DType::bf16), 1.0 / 128);
  }
}

TEST_CASE("conv2d's fast path reads permuted and sliced views in all three passes") {
  for (const ConvCase& c : {fast_path_cases()[4], fast_path_cases()[5], fast_path_cases()[7]}) {
    INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups);
    const Shape& in = c.input;
    const Shape out = out_shape_of(c);
    // x: a permuted view of an NHWC tensor; w: its kernel dims transposed; b: every other element;
    // g: a column range of a wider tensor.
    const Tensor x = randn_of({in[0], in[2], in[3], in[1]}, DType::f32).permute({0, 3, 1, 2});
    const Tensor w = randn_of({c.weight[0], c.weight[1], c.weight[3], c.weight[2]}, DType::f32).transpose(2, 3);
    const Tensor b = randn_of({2 * c.weight[0]}, DType::f32).slice(0, 0, 2 * c.weight[0], 2);
    const Tensor g = randn_of({out[0], out[1], out[2], out[3] + 3}, DType::f32).narrow(3, 2, out[3]);
    for (const Tensor* t : {&x, &w, &b, &g}) REQUIRE_FALSE(t->is_contiguous());
    // As in the f32 test above: a few roundings of the sum's size apart.
    check_fast_path(c, x, w, b, g, 1e-5);
    // The views give what their contiguous copies give, bit for bit: the same kernels run on the same values.
    const Conv2dParams params{c.stride, c.padding, c.dilation, c.groups};
    const ConvPassResults views = run_conv_passes(false, x, w, b, g, params);
    const ConvPassResults copies =
        run_conv_passes(false, x.contiguous(), w.contiguous(), b.contiguous(), g.contiguous(), params);
    CHECK(test::values(views.out) == test::values(copies.out));
    CHECK(test::values(views.grad_input) == test::values(copies.grad_input));
    CHECK(test::values(views.grad_weight) == test::values(copies.grad_weight));
  }
}

TEST_CASE("conv2d runs f32, bf16 and f16 on oneDNN and f64 on the im2col reference") {
  const Conv2dParams params{1, 1, 1, 1};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    CAPTURE(dtype);
    CHECK(runs_on_onednn(cpu::ConvPass::forward, {2, 16, 8, 8}, {16, 16, 3, 3}, dtype, params));
  }
  CHECK(cpu::conv2d_implementation(cpu::ConvPass::forward, {2, 16, 8, 8}, {16, 16, 3, 3}, DType::f64, params) ==
        "im2col + GEMM");
  // An empty batch is left to the reference, which knows an empty sum is zero.
  CHECK_FALSE(runs_on_onednn(cpu::ConvPass::grad_weight, {0, 16, 8, 8}, {16, 16, 3, 3}, DType::f32, params));
  const Tensor grad_weight = full({4, 2, 3, 3}, 7.0, {DType::f32});
  cpu::conv2d_grad_weight(grad_weight, empty({0, 4, 5, 5}, {DType::f32}), empty({0, 2, 5, 5}, {DType::f32}), params);
  CHECK(test::values(grad_weight) == std::vector<double>(grad_weight.numel(), 0.0));
}

TEST_CASE("conv2d's fast path gives the same bits from several threads at once as from one") {
  // Plans are made and run concurrently from four threads (Note [oneDNN convolution plans]): the
  // cache and the scratch memory must keep them apart.
  const std::vector<ConvCase>& cases = fast_path_cases();
  std::vector<std::array<Tensor, 4>> inputs;
  for (const ConvCase& c : cases)
    inputs.push_back({randn_of(c.input, DType::f32), randn_of(c.weight, DType::f32),
                      randn_of({c.weight[0]}, DType::f32), randn_of(out_shape_of(c), DType::f32)});
  const auto run = [&](size_t i) {
    const ConvCase& c = cases[i];
    const ConvPassResults r = run_conv_passes(false, inputs[i][0], inputs[i][1], inputs[i][2], inputs[i][3],
                                              {c.stride, c.padding, c.dilation, c.groups});
    return std::vector<std::vector<double>>{test::values(r.out), test::values(r.grad_input),
                                            test::values(r.grad_weight)};
  };
  std::vector<std::vector<std::vector<double>>> alone;
  for (size_t i = 0; i < cases.size(); ++i) alone.push_back(run(i));
  std::vector<std::vector<std::vector<double>>> together(cases.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < cases.size(); i += 4) together[i] = run(i);
    });
  for (std::thread& thread : threads) thread.join();
  CHECK(together == alone);
}

TEST_CASE("conv2d's fast path is bit-identical run to run at 1 and at 2 threads") {
  // ResNet-like shapes on oneDNN's blocked kernels: a 3x3 convolution (all three passes) and a 7x7
  // stride-2 stem (forward and weight gradient), whose weight gradients sum over the batch.
  for (const ConvCase& c : std::vector<ConvCase>{{{4, 32, 14, 14}, {32, 32, 3, 3}, 1, 1, 1, 1},
                                                 {{4, 3, 32, 32}, {16, 3, 7, 7}, 2, 3, 1, 1}}) {
    INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight));
    const Tensor x = randn_of(c.input, DType::f32), w = randn_of(c.weight, DType::f32);
    const Tensor b = randn_of({c.weight[0]}, DType::f32), g = randn_of(out_shape_of(c), DType::f32);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      test::NumThreadsGuard guard(threads);
      const auto once = [&] {
        const ConvPassResults r = run_conv_passes(false, x, w, b, g, {c.stride, c.padding, c.dilation, c.groups});
        return std::vector<std::vector<double>>{test::values(r.out), test::values(r.grad_input),
                                                test::values(r.grad_weight)};
      };
      CHECK(once() == once());
    }
  }
}

// ---- images folded into one GEMM, against the one-image-per-GEMM reference ----

namespace {

// Shapes whose images are small enough to be folded (Note [Folding images into one GEMM] in
// core/cpu/conv.cpp) and on which at least one pass stays off oneDNN: 1x1 and 2x2 outputs, 1x1, 3x3
// and 7x7 kernels, strides 1 and 2, odd channel counts (fewer than 8 input channels keep grad_input
// off oneDNN, 64 x 64 channels and more or a single one keep grad_weight off it), odd group sizes
// (which oneDNN has no direct kernel for), and batches that are no multiple of the images per GEMM
// (4x4 outputs fold 16 images, 3x3 ones 29).
const std::vector<ConvCase>& folded_cases() {
  static const std::vector<ConvCase> cases{
      {{5, 65, 2, 2}, {67, 65, 3, 3}, 1, 1, 1, 1},     // 2x2: forward and grad_weight folded
      {{3, 64, 4, 3}, {65, 64, 7, 7}, 2, 3, 1, 1},     // 7x7 stride 2 onto 2x2
      {{5, 9, 3, 3}, {11, 9, 3, 3}, 2, 0, 1, 1},       // 1x1 outputs
      {{17, 5, 4, 4}, {6, 5, 3, 3}, 1, 1, 1, 1},       // grad_input in units of 16 + 1 images
      {{30, 3, 3, 3}, {5, 3, 3, 3}, 1, 1, 1, 1},       // 29 + 1 images
      {{6, 1, 4, 4}, {4, 1, 3, 3}, 1, 1, 1, 1},        // one input channel
      {{5, 7, 4, 4}, {9, 7, 1, 1}, 2, 0, 1, 1},        // a downsample: 1x1 stride 2
      {{6, 5, 3, 2}, {7, 5, 1, 1}, 1, 0, 1, 1},        // 1x1 stride 1: col is the image
      {{5, 12, 4, 4}, {9, 4, 3, 3}, {2, 1}, 1, 1, 3},  // odd group sizes
      {{9, 6, 4, 5}, {8, 3, 3, 2}, 1, {1, 0}, 2, 2},   // dilation and groups
  };
  return cases;
}

}  // namespace

TEST_CASE("conv2d's folded im2col path matches the one-image reference in all three passes") {
  for (const ConvCase& c : folded_cases()) {
    for (bool views : {false, true}) {
      INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups, " views ", views);
      const Conv2dParams params{c.stride, c.padding, c.dilation, c.groups};
      CHECK(std::any_of(kConvPasses.begin(), kConvPasses.end(), [&](cpu::ConvPass pass) {
        return !runs_on_onednn(pass, c.input, c.weight, DType::f32, params);
      }));
      const Shape& in = c.input;
      const Shape out = out_shape_of(c);
      // As views: x a permuted NHWC tensor, g a column range of a wider tensor.
      const Tensor x =
          views ? randn_of({in[0], in[2], in[3], in[1]}, DType::f32).permute({0, 3, 1, 2}) : randn_of(in, DType::f32);
      const Tensor g = views ? randn_of({out[0], out[1], out[2], out[3] + 3}, DType::f32).narrow(3, 2, out[3])
                             : randn_of(out, DType::f32);
      // The same products summed in other orders (the GEMM blocks a longer inner dimension
      // differently): a few roundings apart, as in the oneDNN tests above.
      check_against_reference(params, x, randn_of(c.weight, DType::f32), randn_of({c.weight[0]}, DType::f32), g, 1e-5);
    }
  }
}

TEST_CASE("conv2d's folded path in f64 matches the direct convolution") {
  for (const ConvCase& c : folded_cases()) {
    INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups);
    const Tensor x = randn_of(c.input), w = randn_of(c.weight), g = randn_of(out_shape_of(c));
    const Conv2dParams params{c.stride, c.padding, c.dilation, c.groups};
    const ConvArgs args{c.stride, c.padding, c.dilation, c.groups};
    const ConvPassResults fast = run_conv_passes(false, x, w, Tensor(), g, params);
    const auto [grad_x, grad_w] = reference_conv2d_grads(x, w, g, args);
    // f64 sums of up to ~3000 products of N(0, 1) values.
    CHECK(test::max_abs_diff(fast.out, reference_conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups)) <=
          1e-10);
    CHECK(test::max_abs_diff(fast.grad_input, grad_x) <= 1e-10);
    CHECK(test::max_abs_diff(fast.grad_weight, grad_w) <= 1e-10);
  }
}

TEST_CASE("the weight gradient of folded images is bit-identical on 1 and 2 threads") {
  // Summed over the whole batch in chunks of input channels at offsets fixed by the shape (Note
  // [Weight gradient over the whole batch] in core/cpu/conv.cpp), each chunk's GEMM on one thread.
  for (const ConvCase& c : {folded_cases()[0], folded_cases()[1], folded_cases()[6], folded_cases()[8]}) {
    INFO("input ", shape_str(c.input), " weight ", shape_str(c.weight), " groups ", c.groups);
    const Conv2dParams params{c.stride, c.padding, c.dilation, c.groups};
    REQUIRE_FALSE(runs_on_onednn(cpu::ConvPass::grad_weight, c.input, c.weight, DType::f32, params));
    const Tensor x = randn_of(c.input, DType::f32), g = randn_of(out_shape_of(c), DType::f32);
    const auto grad_weight = [&](int threads) {
      test::NumThreadsGuard guard(threads);
      const Tensor result = empty(c.weight, {DType::f32});
      cpu::conv2d_grad_weight(result, g, x, params);
      return test::values(result);
    };
    CHECK(grad_weight(1) == grad_weight(2));
  }
}

// ---- pooling ----

TEST_CASE("max_pool2d picks each window's maximum and records where it is") {
  const Tensor x = tensor(std::vector<double>{1, 5, 2, 0, 3, 4, 8, 1, 0, 7, 6, 2, 9, 1, 3, 5}, {1, 1, 4, 4});
  auto [out, indices] = max_pool2d_with_indices(x, 2);
  CHECK(test::values(out) == std::vector<double>{5, 8, 9, 6});
  CHECK(test::values(indices) == std::vector<double>{1, 6, 12, 10});
  CHECK(indices.dtype() == DType::i64);
  std::tie(out, indices) = max_pool2d_with_indices(x, 3, 2, 1);
  CHECK(test::values(out) == std::vector<double>{5, 8, 9, 8});
  CHECK(test::values(indices) == std::vector<double>{1, 6, 12, 6});
  std::tie(out, indices) = max_pool2d_with_indices(x, 2, 3, 0, 1, /*ceil_mode=*/true);
  CHECK(test::values(out) == std::vector<double>{5, 1, 9, 5});
  CHECK(test::values(indices) == std::vector<double>{1, 7, 12, 15});
}

TEST_CASE("max_pool2d keeps the first of tied maxima and lets NaN win") {
  auto [out, indices] = max_pool2d_with_indices(tensor(std::vector<double>{2, 2, 1, 2}, {1, 1, 2, 2}), 2);
  CHECK(test::values(indices) == std::vector<double>{0});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::tie(out, indices) = max_pool2d_with_indices(tensor(std::vector<double>{-inf, nan, 3, nan}, {1, 1, 2, 2}), 2);
  CHECK(std::isnan(out.item()));
  CHECK(test::values(indices) == std::vector<double>{3});
}

TEST_CASE("max_pool2d matches a direct reference with padding, dilation, ceil_mode and strided input") {
  struct Case {
    Size2 kernel, stride, padding, dilation;
    bool ceil_mode;
  };
  const Tensor x = randn_of({2, 3, 7, 6}).transpose(2, 3);  // [2, 3, 6, 7], not contiguous
  for (const Case& c : std::vector<Case>{{2, 2, 0, 1, false},
                                         {3, 2, 1, 1, true},
                                         {{3, 2}, {2, 1}, {1, 0}, {2, 1}, true},
                                         {2, 3, 0, 1, true},
                                         {3, {3, 2}, 1, 2, false}}) {
    INFO("kernel ", c.kernel.str(), " stride ", c.stride.str(), " padding ", c.padding.str(), " dilation ",
         c.dilation.str(), " ceil_mode ", c.ceil_mode);
    const auto [out, indices] = max_pool2d_with_indices(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
    const ReferencePool expected =
        reference_pool(x, true, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode, false);
    CHECK(test::values(out) == expected.values);
    CHECK(test::values(indices) == expected.indices);
  }
}

TEST_CASE("avg_pool2d divides as PyTorch does with padding, count_include_pad, ceil_mode and divisor_override") {
  const Tensor x = arange(1, 10, 1, {DType::f64}).reshape({1, 1, 3, 3});
  CHECK(test::values(avg_pool2d(x, 2, 1)) == std::vector<double>{3, 4, 6, 7});
  CHECK(test::values(avg_pool2d(x, 2, 2, 1)) == std::vector<double>{0.25, 1.25, 2.75, 7});
  CHECK(test::values(avg_pool2d(x, 2, 2, 1, false, /*count_include_pad=*/false)) ==
        std::vector<double>{1, 2.5, 5.5, 7});
  CHECK(test::values(avg_pool2d(x, 2, 2, 0, /*ceil_mode=*/true)) == std::vector<double>{3, 4.5, 7.5, 9});
  CHECK(test::values(avg_pool2d(x, 2, 2, 0, true, true, /*divisor_override=*/3)) == std::vector<double>{4, 3, 5, 3});
}

TEST_CASE("avg_pool2d matches a direct reference on odd shapes") {
  struct Case {
    Size2 kernel, stride, padding;
    bool ceil_mode, count_include_pad;
  };
  const Tensor x = randn_of({2, 2, 7, 5});
  for (const Case& c : std::vector<Case>{{3, 2, 1, true, true},
                                         {3, 2, 1, true, false},
                                         {{2, 3}, {3, 2}, {1, 0}, false, true},
                                         {{4, 2}, 3, {2, 1}, true, false}}) {
    INFO("kernel ", c.kernel.str(), " stride ", c.stride.str(), " padding ", c.padding.str(), " ceil_mode ",
         c.ceil_mode, " count_include_pad ", c.count_include_pad);
    const Tensor out = avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad);
    const std::vector<double> expected =
        reference_pool(x, false, c.kernel, c.stride, c.padding, 1, c.ceil_mode, c.count_include_pad).values;
    REQUIRE(out.numel() == static_cast<int64_t>(expected.size()));
    CHECK(test::max_abs_diff(out.flatten(), tensor(expected)) <= kF64Tolerance);
  }
}

TEST_CASE("adaptive_avg_pool2d averages evenly spread, overlapping windows") {
  const Tensor x = arange(0, 25, 1, {DType::f64}).reshape({1, 1, 5, 5});
  // Rows [0, 3) and [2, 5): window (0, 0) averages rows 0-2, columns 0-2 of the ramp.
  CHECK(test::values(adaptive_avg_pool2d(x, 2)) == std::vector<double>{6, 8, 16, 18});
  CHECK(test::values(adaptive_avg_pool2d(x, {3, 2})) == std::vector<double>{3.5, 5.5, 11, 13, 18.5, 20.5});
  const Tensor y = randn_of({2, 3, 4, 6});
  CHECK(test::max_abs_diff(adaptive_avg_pool2d(y, 1), y.mean({2, 3}, true)) <= kF64Tolerance);
}

TEST_CASE("pooling gradients pass gradcheck") {
  const Tensor x = distinct_input({2, 2, 7, 6});
  CHECK_GRADCHECK([](const TensorList& in) { return max_pool2d(in[0], 2); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return max_pool2d(in[0], 3, 2, 1, 1, true); }, {x});
  CHECK_GRADCHECK([](const TensorList& in) { return max_pool2d(in[0], {3, 2}, Size2{1, 2}, {1, 0}, {2, 1}); }, {x});
  const Tensor y = test::rand_input({2, 2, 7, 6});
  CHECK_GRADCHECK([](const TensorList& in) { return avg_pool2d(in[0], 3, 2, 1, true, true); }, {y});
  CHECK_GRADCHECK([](const TensorList& in) { return avg_pool2d(in[0], 3, 2, 1, true, false); }, {y});
  CHECK_GRADCHECK([](const TensorList& in) { return avg_pool2d(in[0], {2, 3}, Size2{1, 2}, 0, false, true, 5); }, {y});
  CHECK_GRADCHECK([](const TensorList& in) { return adaptive_avg_pool2d(in[0], {3, 4}); }, {y});
  CHECK_GRADCHECK([](const TensorList& in) { return adaptive_avg_pool2d(in[0], 1); },
                  {test::noncontiguous_input({2, 2, 3, 5})});
}

TEST_CASE("pooling of an unbatched input and on 1 or 2 threads gives the same values") {
  Tensor x = randn_of({64, 40, 39}, DType::f32).requires_grad_();  // planes enough for two threads
  const auto run = [&](int threads) {
    test::NumThreadsGuard guard(threads);
    x.mutable_grad() = Tensor();
    const Tensor max = max_pool2d(x, 2), avg = avg_pool2d(x, 3, 2, 1), adaptive = adaptive_avg_pool2d(x, {4, 3});
    (max.sum() + avg.sum() + adaptive.sum()).backward();
    return std::vector<std::vector<double>>{test::values(max), test::values(avg), test::values(adaptive),
                                            test::values(x.grad())};
  };
  CHECK(max_pool2d(x, 2).sizes() == Shape{64, 20, 19});
  CHECK(run(1) == run(2));
}

TEST_CASE("pooling errors name the op and the sizes") {
  const Tensor x = randn_of({1, 2, 5, 5});
  CHECK_THROWS_WITH_AS(max_pool2d(x, 2, 2, 2),
                       "max_pool2d: padding must be between 0 and half the kernel size, got padding (2, 2) for "
                       "kernel_size (2, 2)",
                       Error);
  CHECK_THROWS_WITH_AS(max_pool2d(x, 7), doctest::Contains("max_pool2d: the input [1, 2, 5, 5] is too small"), Error);
  // Dilation 3 over a width of 2: output column 0's taps, -1 and 2, both miss the input. Once
  // allowed, its index pointed outside the window and the backward wrote past the plane.
  CHECK_THROWS_WITH_AS(max_pool2d(randn_of({2, 1, 3, 2}), {1, 2}, 1, {0, 1}, {1, 3}),
                       "max_pool2d: the window of output column 0 (kernel_size (1, 2), stride (1, 1), padding (0, 1), "
                       "dilation (1, 3)) has no tap inside the input [2, 1, 3, 2]: every window must cover at least "
                       "one input element",
                       Error);
  CHECK(max_pool2d(randn_of({2, 1, 3, 3}), {1, 2}, 1, {0, 1}, {1, 3}).sizes() ==
        Shape{2, 1, 3, 2});  // taps 2 and 0 land
  CHECK_THROWS_WITH_AS(avg_pool2d(x, {0, 2}), "avg_pool2d: kernel_size must be positive, got (0, 2)", Error);
  CHECK_THROWS_WITH_AS(avg_pool2d(x, 2, 0), "avg_pool2d: stride must be positive, got (0, 0)", Error);
  CHECK_THROWS_WITH_AS(adaptive_avg_pool2d(randn_of({5, 5}), 1), doctest::Contains("got shape [5, 5]"), Error);
  CHECK_THROWS_WITH_AS(adaptive_avg_pool2d(x, {0, 1}), doctest::Contains("output_size must be positive"), Error);
  CHECK_THROWS_WITH_AS(max_pool2d(zeros({1, 1, 4, 4}, {DType::i64}), 2), doctest::Contains("expected a floating input"),
                       Error);
}

// ---- layers ----

TEST_CASE("nn::Conv2d registers weight and bias with PyTorch's shapes and initial bounds") {
  Generator generator(7);
  nn::Conv2d conv(4, 8, {3, 2}, {.groups = 2, .generator = &generator});
  const auto named = conv.named_parameters();
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "weight");
  CHECK(named[1].first == "bias");
  CHECK(conv.weight.sizes() == Shape{8, 2, 3, 2});
  CHECK(conv.bias.sizes() == Shape{8});
  // fan_in = 4 / 2 * 3 * 2 = 12: every value in [-1/sqrt(12), 1/sqrt(12)), and they spread over most of it.
  const double bound = 1.0 / std::sqrt(12.0);
  for (const Tensor& p : {conv.weight, conv.bias}) {
    const std::vector<double> v = test::values(p);
    const auto [low, high] = std::minmax_element(v.begin(), v.end());
    CHECK(*low >= -bound);
    CHECK(*high < bound);
    CHECK(*high - *low > bound);
  }
  Generator same_seed(7);
  nn::Conv2d again(4, 8, {3, 2}, {.groups = 2, .generator = &same_seed});
  CHECK(test::values(again.weight) == test::values(conv.weight));
}

TEST_CASE("nn::Conv2d's forward is conv2d with its options") {
  nn::Conv2d conv(3, 4, 3, {.stride = {2, 1}, .padding = 1, .bias = false});
  CHECK_FALSE(conv.bias.defined());
  CHECK(conv.named_parameters().size() == 1);
  const Tensor x = randn({2, 3, 7, 6});
  CHECK(test::values(conv(x)) == test::values(conv2d(x, conv.weight, Tensor(), {2, 1}, 1)));
}

TEST_CASE("convolution and pooling layers print like PyTorch's") {
  CHECK(nn::Conv2d(1, 32, 5, {.padding = 2}).str() ==
        "Conv2d(1, 32, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))");
  CHECK(nn::Conv2d(4, 8, {3, 2}, {.stride = 2, .dilation = 2, .groups = 2, .bias = false}).str() ==
        "Conv2d(4, 8, kernel_size=(3, 2), stride=(2, 2), dilation=(2, 2), groups=2, bias=False)");
  CHECK(nn::MaxPool2d(2).str() == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  CHECK(nn::MaxPool2d({3, 2}, {.stride = Size2{2, 1}, .ceil_mode = true}).str() ==
        "MaxPool2d(kernel_size=(3, 2), stride=(2, 1), padding=0, dilation=1, ceil_mode=True)");
  CHECK(nn::AvgPool2d(3, {.stride = 2, .padding = 1}).str() == "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  CHECK(nn::AdaptiveAvgPool2d(1).str() == "AdaptiveAvgPool2d(output_size=1)");
}

TEST_CASE("pooling layers run their functional op") {
  const Tensor x = randn({2, 3, 6, 6});
  CHECK(test::values(nn::MaxPool2d(2)(x)) == test::values(max_pool2d(x, 2)));
  CHECK(test::values(nn::AvgPool2d(3, {.stride = 2, .padding = 1, .count_include_pad = false})(x)) ==
        test::values(avg_pool2d(x, 3, 2, 1, false, false)));
  CHECK(nn::AdaptiveAvgPool2d({2, 3})(x).sizes() == Shape{2, 3, 2, 3});
}
