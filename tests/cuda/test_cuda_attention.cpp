// The fused attention on the GPU (core/cuda/attention.cu) against the CPU kernel, forward and
// backward: every floating dtype, causal or not, masks that broadcast, views of a packed
// projection, sizes that cross the tiles, dropout (the same keep-mask on both devices) and fully
// masked rows.
#include "backward_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

Tensor random(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

// The backward sums over a whole row of keys: f32 gradients to 1e-4, 16-bit ones to their dtype's tolerance.
double gradient_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-4 : -1; }

}  // namespace

TEST_CASE("fused attention on the GPU matches the CPU, causal or not, in every floating dtype") {
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const bool causal : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(causal);
      const Tensor q = random({2, 3, 70, 16}, dtype), k = random({2, 3, 45, 16}, dtype),
                   v = random({2, 3, 45, 24}, dtype);
      test::check_forward_backward_match_cpu(
          [causal](const TensorList& t) {
            return scaled_dot_product_attention(t[0], t[1], t[2], {.is_causal = causal});
          },
          {q, k, v}, -1, gradient_tolerance(dtype));
    }
  }
}

TEST_CASE("fused attention on the GPU matches the CPU with masks and views of a packed projection") {
  const Tensor packed = random({2, 33, 3 * 2 * 8}, DType::f32);
  const Tensor keep = random({33, 33}, DType::f32).gt(full({33, 33}, -1.0));
  const Tensor added = random({2, 1, 33, 33}, DType::f32);
  for (const Tensor& mask : {keep, added}) {
    CAPTURE(mask.dtype());
    test::check_forward_backward_match_cpu(
        [&](const TensorList& t) {
          const Tensor qkv = t[0].reshape({2, 33, 3, 2, 8}).permute({2, 0, 3, 1, 4});
          return scaled_dot_product_attention(qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2),
                                              {.attn_mask = mask.to(t[0].device())});
        },
        {packed}, -1, 1e-4);
  }
}

TEST_CASE("fused attention dropout draws the same keep-mask on the GPU as on the CPU") {
  const Tensor q = random({2, 2, 40, 8}, DType::f32), k = random({2, 2, 40, 8}, DType::f32),
               v = random({2, 2, 40, 8}, DType::f32);
  test::check_forward_backward_match_cpu(
      [](const TensorList& t) {
        Generator generator(77);  // the same state on each device
        return scaled_dot_product_attention(t[0], t[1], t[2], {.dropout_p = 0.3, .is_causal = true}, &generator);
      },
      {q, k, v}, -1, 1e-4);
}

TEST_CASE("a fully masked row gives 0 on the GPU, as on the CPU") {
  const Tensor q = random({1, 3, 4}, DType::f32), k = random({1, 5, 4}, DType::f32), v = random({1, 5, 4}, DType::f32);
  Tensor keep = ones({3, 5}, {DType::boolean});
  keep.select(0, 1).fill_(0.0);
  test::check_forward_backward_match_cpu(
      [&](const TensorList& t) {
        return scaled_dot_product_attention(t[0], t[1], t[2], {.attn_mask = keep.to(t[0].device())});
      },
      {q, k, v}, -1, 1e-4);
}
