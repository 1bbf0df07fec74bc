// The CPU loop of the random fills: element i gets math::draw of its Philox block (core/philox.h),
// in parallel over elements; a strided view is filled through a contiguous scratch tensor.
// multinomial sums each row's weights, then draws every sample from its row's sums.
#include <algorithm>
#include <vector>

#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"
#include "core/parallel.h"

namespace sg::cpu {

void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name) {
  const int64_t n = t.numel();
  Tensor target = t.is_contiguous()
                      ? t
                      : Tensor(std::make_shared<TensorImpl>(std::make_shared<Storage>(n * t.element_size(), t.device()),
                                                            0, t.sizes(), contiguous_strides(t.sizes()), t.dtype()));
  SG_DISPATCH_ALL(t.dtype(), op_name, [&]<typename scalar_t>() {
    scalar_t* data = static_cast<scalar_t*>(target.raw_data());
    parallel_for(n, kParallelGrain / 8, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const PhiloxBlock block = philox4x32_10(seed, first + static_cast<uint64_t>(i / 2));
        data[i] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(math::draw(draw, int(i % 2), block)));
      }
    });
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
