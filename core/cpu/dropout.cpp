// The CPU dropout. Each batch of sixteen Philox blocks (cpu::philox_batch) decides 32 elements,
// which are written as soon as they are decided — keep, and the input times the mask — where the
// three passes of the contract (core/kernels/dropout.h) write a float mask, scale it, read it back
// and multiply. The backward reads one byte of keep per element instead of a float mask.
// An element's draw depends only on its index, so no thread split changes a bit.
#include <algorithm>
#include <cstdint>

#include "core/convert_math.h"
#include "core/cpu/dropout_kernels.h"
#include "core/cpu/philox_batch.h"
#include "core/parallel.h"
#include "core/philox.h"

namespace sg::cpu {

namespace {

constexpr int64_t kElementsPerBatch = 2 * kPhiloxBatch;

// The mask where an element is kept: 1 / (1 - p) rounded to the dtype, as the three passes' fill
// rounds it (p = 1 keeps nothing, so its value is never used).
template <typename scalar_t>
opmath_t<scalar_t> kept_value(double p) {
  return p < 1 ? static_cast<opmath_t<scalar_t>>(convert<scalar_t, double>(1.0 / (1.0 - p))) : 0;
}

// One batch of draws decides elements [0, count) of in / out / keep (the last batch may draw past
// the tensor: nothing is stored from those draws). math::draw_bernoulli(half, block, 1 - p) of both
// halves of every block is decided word array by word array, then interleaved into element order,
// and the mask applied as keep * kept: loops that vectorise, where one loop over the elements with
// a select in it cost twice the draws themselves.
template <typename scalar_t>
void dropout_batch(const PhiloxBatch& batch, double keep_probability, opmath_t<scalar_t> kept, const scalar_t* in,
                   scalar_t* out, uint8_t* keep, int64_t count) {
  using math_t = opmath_t<scalar_t>;
  uint8_t half0[kPhiloxBatch], half1[kPhiloxBatch], kept_here[kElementsPerBatch];
  for (int l = 0; l < kPhiloxBatch; ++l) {
    half0[l] = uniform_double(batch.word[0][l], batch.word[1][l]) < keep_probability;
    half1[l] = uniform_double(batch.word[2][l], batch.word[3][l]) < keep_probability;
  }
  for (int l = 0; l < kPhiloxBatch; ++l) {
    kept_here[2 * l] = half0[l];
    kept_here[2 * l + 1] = half1[l];
  }
  for (int64_t i = 0; i < count; ++i) {
    keep[i] = kept_here[i];
    out[i] = static_cast<scalar_t>(static_cast<math_t>(in[i]) * (static_cast<math_t>(kept_here[i]) * kept));
  }
}

// keep's bools as bytes (0 or 1): GCC vectorises no loop that loads or stores bool.
uint8_t* keep_bytes(const Tensor& keep) {
  static_assert(sizeof(bool) == 1);
  return reinterpret_cast<uint8_t*>(keep.data_ptr<bool>());
}

}  // namespace

void dropout(const Tensor& out, const Tensor& keep, const Tensor& input, double p, uint64_t seed, uint64_t first) {
  const int64_t n = input.numel();
  uint8_t* keep_data = keep_bytes(keep);
  SG_DISPATCH_FLOATING(input.dtype(), "dropout", [&]<typename scalar_t>() {
    const opmath_t<scalar_t> kept = kept_value<scalar_t>(p);
    const scalar_t* in = static_cast<const scalar_t*>(input.raw_data());
    scalar_t* result = static_cast<scalar_t*>(out.raw_data());
    // Two batches at a time, both drawn before either is used: the second's rounds do not depend
    // on the first's, so the core runs them side by side where one batch alone waits on its
    // multiplies (1.27 -> 1.05 ns per element on the Zen 5 of docs/performance.md). The second
    // batch of the last pair may lie past the end.
    const auto run = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const uint64_t first_of_pair = first + static_cast<uint64_t>(b * 2 * kPhiloxBatch);
        PhiloxBatch pair[2];
        pair[0] = philox_batch(seed, first_of_pair);
        pair[1] = philox_batch(seed, first_of_pair + kPhiloxBatch);
        for (int half = 0; half < 2; ++half) {
          const int64_t start = (2 * b + half) * kElementsPerBatch;
          if (start >= n) break;
          dropout_batch(pair[half], 1 - p, kept, in + start, result + start, keep_data + start,
                        std::min(kElementsPerBatch, n - start));
        }
      }
    };
    parallel_for((n + 2 * kElementsPerBatch - 1) / (2 * kElementsPerBatch),
                 std::max<int64_t>(1, kParallelGrain / 16 / kElementsPerBatch), run);
  });
}

void dropout_backward(const Tensor& grad_input, const Tensor& grad, const Tensor& keep, double p) {
  const uint8_t* keep_data = keep_bytes(keep);
  SG_DISPATCH_FLOATING(grad.dtype(), "dropout_backward", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const math_t kept = kept_value<scalar_t>(p);
    const scalar_t* g = static_cast<const scalar_t*>(grad.raw_data());
    scalar_t* result = static_cast<scalar_t*>(grad_input.raw_data());
    parallel_for(grad.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        result[i] = static_cast<scalar_t>(static_cast<math_t>(g[i]) * (static_cast<math_t>(keep_data[i]) * kept));
    });
  });
}

}  // namespace sg::cpu
