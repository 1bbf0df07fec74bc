#pragma once
// defines: multinomial — sampling category indices from rows of probabilities, as
//          torch.multinomial. (The random fills — rand, randn, randint — are in core/factory.h.)
#include "core/generator.h"
#include "core/tensor.h"

namespace sg {

// num_samples category indices (i64) per row of `probs`, [categories] -> [num_samples] or
// [rows, categories] -> [rows, num_samples]. The weights need not sum to 1, but must be finite
// and non-negative, with a positive sum per row. Without replacement no index repeats within a
// row (so num_samples <= categories, and at least num_samples categories must have a positive
// weight); samples come in the order they were drawn. Draws come from `generator` (the default
// one when null): the same seed gives the same samples, on the CPU and, with replacement, on a GPU.
// Not differentiable.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* generator = nullptr);

}  // namespace sg
