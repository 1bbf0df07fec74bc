// The CPU sorting kernel: each row of the last dim becomes (key, position) pairs (Note [Sorting by
// an order-preserving key], core/sort_key.h), ordered row by row in parallel over rows. Pairs
// compare by key, then by position, so the order is the stable one; topk puts only its first k
// in place (std::partial_sort, n log k), a full sort uses std::sort (faster than a heap for k = n).
#include <algorithm>
#include <utility>
#include <vector>

#include "core/cpu/sort_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/parallel.h"
#include "core/sort_key.h"

namespace sg::cpu {

void sorted_positions(const Tensor& positions, const Tensor& x, bool descending) {
  if (positions.numel() == 0) return;
  const Tensor rows_of_x = kernels::contiguous(x);
  const int64_t length = x.size(-1), k = positions.size(-1), rows = x.numel() / length;
  int64_t* out = positions.data_ptr<int64_t>();
  SG_DISPATCH_ALL(x.dtype(), "sort", [&]<typename scalar_t>() {
    const scalar_t* values = static_cast<const scalar_t*>(rows_of_x.raw_data());
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / length), [&](int64_t begin, int64_t end) {
      std::vector<std::pair<uint64_t, int64_t>> row(length);  // (key, position)
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t i = 0; i < length; ++i) row[i] = {sort_key(values[r * length + i], descending), i};
        if (k == length) std::sort(row.begin(), row.end());
        else std::partial_sort(row.begin(), row.begin() + k, row.end());
        for (int64_t j = 0; j < k; ++j) out[r * k + j] = row[j].second;
      }
    });
  });
}

}  // namespace sg::cpu
