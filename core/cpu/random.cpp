// The CPU loop of the random fills: element i gets math::draw of its Philox block (core/philox.h),
// computed a batch of blocks at a time (Note [Random fills a batch at a time]); a strided view is
// filled through a contiguous scratch tensor. multinomial sums each row's weights, then draws every
// sample from its row's sums.
#include <algorithm>
#include <vector>

#include "core/cpu/philox_batch.h"
#include "core/cpu/pointwise_kernels.h"  // defines: cpu::copy, for a fill through a contiguous buffer
#include "core/cpu/random_kernels.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

// Note [Random fills a batch at a time]
// Elements 2k and 2k + 1 of a fill draw from the two halves of Philox block first + k, so each
// block is computed once, for both (and normal_'s log and sqrt once per pair: draw_normal_pair).
// The blocks come kPhiloxBatch at a time from philox_batch (AVX2); each batch's values go to a
// small array of doubles (math::draw's type) and are then converted to the dtype and stored, the
// last batch only in part. The draws themselves stay scalar (turning 64 random bits into a double
// has no AVX2 instruction); Philox was the larger cost.
// An element's value depends only on its index, so the parallel split over batches cannot change
// the result: any thread count gives the same bits, and so does the GPU (core/philox.h).
constexpr int64_t kElementsPerBatch = 2 * kPhiloxBatch;

// Fills data[0, n) with draw_pair(block, value of element 2k, value of element 2k + 1).
template <typename scalar_t, typename DrawPair>
void fill_by_blocks(scalar_t* data, int64_t n, uint64_t seed, uint64_t first, DrawPair draw_pair) {
  const int64_t batches = (n + kElementsPerBatch - 1) / kElementsPerBatch;
  parallel_for(batches, std::max<int64_t>(1, kParallelGrain / 8 / kElementsPerBatch), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      // The last batch may compute blocks past the fill's: nothing is stored from them.
      const PhiloxBatch batch = philox_batch(seed, first + static_cast<uint64_t>(b * kPhiloxBatch));
      double values[kElementsPerBatch];
      for (int l = 0; l < kPhiloxBatch; ++l) {
        const PhiloxBlock block{{batch.word[0][l], batch.word[1][l], batch.word[2][l], batch.word[3][l]}};
        draw_pair(block, values[2 * l], values[2 * l + 1]);
      }
      scalar_t* out = data + b * kElementsPerBatch;
      const int64_t count = std::min(kElementsPerBatch, n - b * kElementsPerBatch);
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(values[i]));
    }
  });
}

template <typename scalar_t>
void fill_contiguous(scalar_t* data, int64_t n, uint64_t seed, uint64_t first, const RandomDraw& d) {
  using Kind = RandomDraw::Kind;
  switch (d.kind) {
    case Kind::uniform:
      return fill_by_blocks(data, n, seed, first, [&d](const PhiloxBlock& block, double& v0, double& v1) {
        v0 = math::draw_uniform(0, block, d.low, d.span, d.grid);
        v1 = math::draw_uniform(1, block, d.low, d.span, d.grid);
      });
    case Kind::normal:
      return fill_by_blocks(data, n, seed, first, [&d](const PhiloxBlock& block, double& v0, double& v1) {
        math::draw_normal_pair(block, d.mean, d.std, v0, v1);
      });
    case Kind::randint:
      return fill_by_blocks(data, n, seed, first, [&d](const PhiloxBlock& block, double& v0, double& v1) {
        v0 = static_cast<double>(math::draw_randint(0, block, d.int_low, d.int_range));
        v1 = static_cast<double>(math::draw_randint(1, block, d.int_low, d.int_range));
      });
    case Kind::bernoulli:
      return fill_by_blocks(data, n, seed, first, [&d](const PhiloxBlock& block, double& v0, double& v1) {
        v0 = math::draw_bernoulli(0, block, d.p);
        v1 = math::draw_bernoulli(1, block, d.p);
      });
  }
}

}  // namespace

void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name) {
  const int64_t n = t.numel();
  Tensor target = t.is_contiguous()
                      ? t
                      : Tensor(std::make_shared<TensorImpl>(std::make_shared<Storage>(n * t.element_size(), t.device()),
                                                            0, t.sizes(), contiguous_strides(t.sizes()), t.dtype()));
  SG_DISPATCH_ALL(t.dtype(), op_name, [&]<typename scalar_t>() {
    fill_contiguous(static_cast<scalar_t*>(target.raw_data()), n, seed, first, draw);
  });
  if (!target.is_same(t)) copy(t, target);
}

void multinomial_with_replacement(const Tensor& out, const Tensor& probs, uint64_t seed, uint64_t first) {
  const Tensor weights = kernels::contiguous(probs);
  const int64_t rows = out.size(0), samples = out.size(1), categories = probs.size(1);
  std::vector<double> cdf(rows * categories);  // each row's running sums, in double and in index order
  SG_DISPATCH_FLOATING(probs.dtype(), "multinomial", [&]<typename scalar_t>() {
    const scalar_t* w = static_cast<const scalar_t*>(weights.raw_data());
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / categories), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        double running = 0;
        for (int64_t i = 0; i < categories; ++i) {
          running += static_cast<double>(static_cast<opmath_t<scalar_t>>(w[r * categories + i]));
          cdf[r * categories + i] = running;
        }
      }
    });
  });
  int64_t* target = out.data_ptr<int64_t>();
  parallel_for(rows * samples, kParallelGrain / 8, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      const PhiloxBlock block = philox4x32_10(seed, first + static_cast<uint64_t>(e / 2));
      target[e] = math::draw_category(int(e % 2), block, cdf.data() + (e / samples) * categories, categories);
    }
  });
}

}  // namespace sg::cpu
