#pragma once
// defines: the random fill kernels (uniform_, normal_, randint_, bernoulli_).
//
// Element i of a fill always draws from Philox block (first + i / 2), so the values depend on
// the seed and the element index only — not on the thread count or the device.
#include "core/generator.h"
#include "core/tensor.h"

namespace sg::kernels {

void uniform_(const Tensor& t, double low, double high, Generator& generator);
void normal_(const Tensor& t, double mean, double std, Generator& generator);
void randint_(const Tensor& t, int64_t low, int64_t high, Generator& generator);
void bernoulli_(const Tensor& t, double p, Generator& generator);  // 1 with probability p, else 0

}  // namespace sg::kernels
