// The CPU loop of the random fills: element i gets math::draw of its Philox block (core/philox.h),
// in parallel over elements; a strided view is filled through a contiguous scratch tensor.
#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"
#include "core/parallel.h"

namespace sg::cpu {

void random_fill(const Tensor& t, uint64_t seed, uint64_t first, const RandomDraw& draw, const char* op_name) {
  const int64_t n = t.numel();
  Tensor target = t.is_contiguous() ? t : Tensor(std::make_shared<TensorImpl>(
      std::make_shared<Storage>(n * t.element_size(), t.device()), 0, t.sizes(),
      contiguous_strides(t.sizes()), t.dtype()));
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

}  // namespace sg::cpu
