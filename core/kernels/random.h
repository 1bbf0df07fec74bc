#pragma once
// defines: the random fill kernels (uniform_, normal_, randint_, bernoulli_) and multinomial
//          sampling with replacement.
//
// Element i of a fill always draws from Philox block (first + i / 2), so the values depend on
// the seed and the element index only — not on the thread count or the device (Note [Random
// numbers are the same on every device], core/philox.h). The generator stays on the host: the
// entry point reserves the fill's blocks there and hands (seed, first) to the device's loop,
// random_fill, which sets element i (row-major) of t, any strides and dtype, to
// math::draw(draw, i % 2, philox4x32_10(seed, first + i / 2)) converted to t's dtype.
#include "core/generator.h"
#include "core/tensor.h"

namespace sg::kernels {

void uniform_(const Tensor& t, double low, double high, Generator& generator);
void normal_(const Tensor& t, double mean, double std, Generator& generator);
void randint_(const Tensor& t, int64_t low, int64_t high, Generator& generator);
void bernoulli_(const Tensor& t, double p, Generator& generator);  // 1 with probability p, else 0

// out[r, j] = a category of row r of `probs` ([rows, categories], floating, any strides), drawn
// with probability proportional to its weight by math::draw_category from the row's running sums
// (in double, in index order). Sample e = r * samples + j draws from block (first + e / 2), as
// element e of a fill. The front has checked every weight finite and >= 0 and every row's sum > 0.
// out: i64, contiguous [rows, samples].
void multinomial_with_replacement(const Tensor& out, const Tensor& probs, Generator& generator);

}  // namespace sg::kernels
