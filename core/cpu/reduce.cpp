#include <algorithm>
#include <vector>

#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/parallel.h"

namespace sg::cpu {

ReductionRows as_reduction_rows(const Tensor& in, const Shape& dims) {
  std::vector<bool> reduced(in.dim(), false);
  for (int64_t d : dims) reduced[d] = true;
  Shape sizes, strides;
  ReductionRows rows{Tensor(), 1, 1};
  for (int pass = 0; pass < 2; ++pass) {  // kept dims, then reduced dims
    for (int64_t d = 0; d < in.dim(); ++d) {
      if (reduced[d] != (pass == 1)) continue;
      sizes.push_back(in.size(d));
      strides.push_back(in.stride(d));
      (pass == 0 ? rows.rows : rows.row_length) *= in.size(d);
    }
  }
  Tensor arranged(std::make_shared<TensorImpl>(in.storage(), in.storage_offset(), sizes, strides, in.dtype()));
  if (!arranged.is_contiguous()) {
    Tensor copy(std::make_shared<TensorImpl>(std::make_shared<Storage>(in.numel() * in.element_size(), in.device()),
                                             0, sizes, contiguous_strides(sizes), in.dtype()));
    kernels::copy(copy, arranged);
    arranged = copy;
  }
  rows.data = arranged;
  return rows;
}

namespace {
template <typename T> struct SumAccumulator { using type = double; };
template <> struct SumAccumulator<int64_t> { using type = int64_t; };
template <> struct SumAccumulator<int32_t> { using type = int64_t; };
template <> struct SumAccumulator<uint8_t> { using type = int64_t; };
template <> struct SumAccumulator<bool> { using type = int64_t; };

// Rows are summed in fixed blocks so a long row can be split across threads and still give
// the same bits for any thread count (Note [Determinism] in docs/design: fixed reduction order).
constexpr int64_t kSumBlock = 8192;

template <typename in_t, typename acc_t>
acc_t sum_range(const in_t* data, int64_t n) {
  acc_t total = 0;
  for (int64_t i = 0; i < n; ++i) total += static_cast<acc_t>(static_cast<opmath_t<in_t>>(data[i]));
  return total;
}
}  // namespace

void sum(const Tensor& out, const Tensor& in, const Shape& dims) {
  const ReductionRows r = as_reduction_rows(in, dims);
  SG_DISPATCH_ALL(in.dtype(), "sum", [&]<typename in_t>() {
    using acc_t = typename SumAccumulator<in_t>::type;
    const in_t* data = static_cast<const in_t*>(r.data.raw_data());
    std::vector<acc_t> totals(r.rows, 0);
    if (r.rows >= get_num_threads() || r.row_length <= kSumBlock) {
      parallel_for(r.rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(r.row_length, 1)),
                   [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          acc_t total = 0;
          for (int64_t b = 0; b < r.row_length; b += kSumBlock)
            total += sum_range<in_t, acc_t>(data + row * r.row_length + b, std::min(kSumBlock, r.row_length - b));
          totals[row] = total;
        }
      });
    } else {  // few long rows: blocks in parallel, then added in block order
      const int64_t blocks_per_row = (r.row_length + kSumBlock - 1) / kSumBlock;
      std::vector<acc_t> partial(r.rows * blocks_per_row);
      parallel_for(r.rows * blocks_per_row, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t row = i / blocks_per_row, b = (i % blocks_per_row) * kSumBlock;
          partial[i] = sum_range<in_t, acc_t>(data + row * r.row_length + b, std::min(kSumBlock, r.row_length - b));
        }
      });
      for (int64_t i = 0; i < r.rows * blocks_per_row; ++i) totals[i / blocks_per_row] += partial[i];
    }
    SG_DISPATCH_ALL(out.dtype(), "sum", [&]<typename out_t>() {
      out_t* result = static_cast<out_t*>(out.raw_data());
      for (int64_t row = 0; row < r.rows; ++row)
        result[row] = static_cast<out_t>(static_cast<opmath_t<out_t>>(totals[row]));
    });
  });
}

}  // namespace sg::cpu
