// multinomial: checks the rows of weights, then draws with replacement by a kernel (each sample
// an inverse-CDF lookup, core/kernels/random.h) or without replacement by an exponential race
// sorted with the sort kernel (core/kernels/sort.h).
#include "autograd/ops_random.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/random.h"
#include "core/kernels/sort.h"

namespace sg {

namespace {

// Every row of `rows` ([rows, categories], at least one row) must be a distribution: finite,
// non-negative weights, at least `needed` of them positive (1 with replacement: a positive sum).
// Read back as a few reductions, so a GPU tensor is checked without copying it to the host.
void check_weights(const Tensor& rows, int64_t needed) {
  const double lowest = amin(rows).item(), highest = amax(rows).item();  // NaN propagates into both
  SG_CHECK(!std::isnan(lowest), "multinomial: the probabilities contain NaN");
  SG_CHECK(lowest >= 0, "multinomial: the probabilities must be non-negative, got ", lowest);
  SG_CHECK(!std::isinf(highest), "multinomial: the probabilities must be finite, got inf");
  const auto [fewest, row] = min(sum(gt(rows, 0.0), {1}), 0);  // the row with the fewest positive weights
  const int64_t positive = fewest.item<int64_t>();
  SG_CHECK(positive > 0, "multinomial: row ", row.item<int64_t>(), " of the probabilities sums to 0");
  SG_CHECK(positive >= needed, "multinomial: row ", row.item<int64_t>(), " has a non-zero probability in only ",
           positive, " of its categories, too few to draw ", needed, " samples without replacement");
}

}  // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* generator) {
  SG_CHECK(probs.dim() == 1 || probs.dim() == 2, "multinomial: the probabilities must be 1-D or 2-D, got shape ",
           shape_str(probs.sizes()));
  SG_CHECK(is_floating(probs.dtype()), "multinomial: expected floating probabilities, got ", probs.dtype());
  const int64_t categories = probs.size(-1);
  SG_CHECK(categories > 0, "multinomial: cannot sample from 0 categories (shape ", shape_str(probs.sizes()), ")");
  SG_CHECK(num_samples > 0, "multinomial: num_samples must be positive, got ", num_samples);
  SG_CHECK(replacement || num_samples <= categories, "multinomial: cannot draw num_samples = ", num_samples,
           " samples without replacement from ", categories, " categories");
  NoGradGuard no_grad;  // integer samples: nothing to differentiate
  const Tensor rows = reshape(probs, {-1, categories});
  const Tensor samples = empty({rows.size(0), num_samples}, {DType::i64, probs.device()});
  if (rows.size(0) > 0) {
    check_weights(rows, replacement ? 1 : num_samples);
    if (replacement) {
      kernels::multinomial_with_replacement(samples, rows, generator ? *generator : default_generator());
    } else {
      // Category i arrives after an Exp(1) wait divided by its weight, -log(1 - u) / w_i; taking the
      // first num_samples arrivals in order is drawing without replacement in proportion to the
      // weights (the exponential race, a form of the Gumbel top-k trick; PyTorch draws this way
      // too). A weight of 0 gives inf (or NaN), which sorts after every real arrival.
      const Tensor u = rand(rows.sizes(), {DType::f64, probs.device()}, generator);
      const Tensor arrival = neg(log(1.0 - u)) / to_dtype(rows, DType::f64);
      kernels::sorted_positions(samples, arrival, /*descending=*/false);
    }
  }
  return probs.dim() == 1 ? reshape(samples, {num_samples}) : samples;
}

}  // namespace sg
