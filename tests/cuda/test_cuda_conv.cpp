// Convolutions on the GPU (cuDNN, core/cuda/conv.cpp) against the CPU's: forward and both
// backward kernels, through conv2d's autograd.
#include "backward_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

struct ConvCase {
  const char* name;
  Shape input, weight;  // [N, C, H, W], [K, C / G, R, S]
  Size2 stride, padding, dilation;
  int64_t groups;
  bool bias;
};

const ConvCase kCases[] = {
    {"3x3, padding 1, bias", {2, 3, 9, 11}, {4, 3, 3, 3}, 1, 1, 1, 1, true},
    {"stride 2, uneven padding, 2 groups", {2, 4, 10, 7}, {6, 2, 3, 2}, 2, {1, 0}, 1, 2, true},
    {"dilation 2, 3 groups, no bias", {1, 6, 12, 12}, {6, 2, 3, 3}, 1, 2, 2, 3, false},
    {"depthwise, stride (2, 1)", {3, 4, 7, 8}, {4, 1, 3, 3}, {2, 1}, 1, 1, 4, true},
    {"pointwise 1x1", {3, 5, 5, 6}, {7, 5, 1, 1}, 1, 0, 1, 1, true},
};

Tensor random(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

}  // namespace

TEST_CASE("conv2d and its gradients on the GPU match the CPU for every floating dtype") {
  for (const ConvCase& c : kCases) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      CAPTURE(c.name);
      CAPTURE(dtype);
      const TensorList inputs{random(c.input, dtype), random(c.weight, dtype),
                              c.bias ? random({c.weight[0]}, dtype) : Tensor()};
      // f32: cuDNN sums a weight gradient's N P Q products (up to ~150 here) in another order than
      // the CPU's GEMM; the rounding of each order is ~1e-6 of the sum of |terms|.
      const double gradient_tolerance = dtype == DType::f32 ? 5e-5 : -1;
      test::check_forward_backward_match_cpu(
          [&](const TensorList& t) { return conv2d(t[0], t[1], t[2], c.stride, c.padding, c.dilation, c.groups); },
          inputs, -1, gradient_tolerance);
    }
  }
}

// cuDNN's heuristics rank FFT and Winograd algorithms first at this shape, the Fashion-MNIST CNN's
// second convolution; those lose digits (Note [Choosing a cuDNN convolution algorithm]). The sums
// are long (800 products per output, 1176 per weight gradient, 1600 per input gradient), and two
// orders of an f32 sum of n terms differ by up to ~n * 2^-24 of the sum of |terms|: about 1e-7 n
// relative to the result's scale here (the CPU's own f32 results are up to 4e-5 from float64's). An
// FFT's error is 100x that. In f16 and bf16 the CPU sums in f32 and rounds once: its results are
// float64's rounded to 16 bits (checked on the CPU), so two units in the last place hold on the GPU
// too unless it rounds partial sums to 16 bits.
TEST_CASE("conv2d at the CNN's 5x5 shape matches the CPU to the rounding of its sums") {
  const Shape input{6, 32, 14, 14}, weight{64, 32, 5, 5};
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    CAPTURE(dtype);
    const TensorList inputs{random(input, dtype), random(weight, dtype), random({weight[0]}, dtype)};
    const bool f32 = dtype == DType::f32;
    test::check_forward_backward_match_cpu([&](const TensorList& t) { return conv2d(t[0], t[1], t[2], 1, 2); }, inputs,
                                           f32 ? 1e-7 * 800 : -1, f32 ? 1e-7 * 1600 : -1);
  }
}

TEST_CASE("conv2d reads a non-contiguous input as the CPU does") {
  const Tensor channels_last = randn({2, 9, 11, 3}, {}, &test::rng());  // NHWC storage
  const Tensor input = channels_last.permute({0, 3, 1, 2});             // seen as NCHW
  const Tensor weight = randn({4, 3, 3, 3}, {}, &test::rng()), bias = randn({4}, {}, &test::rng());
  test::check_matches_cpu(conv2d(input.to(gpu()), weight.to(gpu()), bias.to(gpu()), 2, 1),
                          conv2d(input, weight, bias, 2, 1));
}

TEST_CASE("conv2d of an unbatched [C, H, W] input on the GPU matches the CPU") {
  const Tensor input = randn({3, 8, 8}, {}, &test::rng()), weight = randn({2, 3, 3, 3}, {}, &test::rng());
  test::check_matches_cpu(conv2d(input.to(gpu()), weight.to(gpu()), Tensor(), 1, 1),
                          conv2d(input, weight, Tensor(), 1, 1));
}
