// CPU reductions: each arranges its input as rows (Note [Reductions as rows]) and reduces every
// row with reduce_rows (Note [Deterministic row reductions]); a sum over leading dims adds whole
// rows of the input instead (Note [Sums over leading dims]).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/cpu/reduce_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/parallel.h"
#include "core/strided_offsets.h"

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
  rows.data = kernels::contiguous(
      Tensor(std::make_shared<TensorImpl>(in.storage(), in.storage_offset(), sizes, strides, in.dtype())));
  return rows;
}

namespace {

// Note [Deterministic row reductions]
// A row is cut into blocks of kReduceBlock elements at fixed offsets; each block reduces on its
// own and a row's blocks are combined left to right. The cut depends only on the row length,
// so the result has the same bits for any thread count: threads only decide who computes which
// block. Many rows run in parallel over rows; a few long rows run their blocks in parallel.
constexpr int64_t kReduceBlock = 8192;

// reduce_block(row, begin, end) reduces elements [begin, end) of a row (it is called with an
// empty range for rows of length 0); combine(left, right) joins adjacent blocks' results.
template <typename acc_t, typename ReduceBlock, typename Combine>
std::vector<acc_t> reduce_rows(const ReductionRows& r, ReduceBlock reduce_block, Combine combine) {
  const int64_t blocks_per_row = std::max<int64_t>(1, (r.row_length + kReduceBlock - 1) / kReduceBlock);
  auto block = [&](int64_t row, int64_t b) {
    const int64_t begin = b * kReduceBlock;
    return reduce_block(row, begin, std::min(r.row_length, begin + kReduceBlock));
  };
  std::vector<acc_t> results(r.rows);
  if (r.rows >= get_num_threads() || blocks_per_row == 1) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(r.row_length, 1));
    parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        acc_t result = block(row, 0);
        for (int64_t b = 1; b < blocks_per_row; ++b) result = combine(result, block(row, b));
        results[row] = result;
      }
    });
  } else {
    std::vector<acc_t> partial(r.rows * blocks_per_row);
    parallel_for(r.rows * blocks_per_row, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) partial[i] = block(i / blocks_per_row, i % blocks_per_row);
    });
    for (int64_t row = 0; row < r.rows; ++row) {
      acc_t result = partial[row * blocks_per_row];
      for (int64_t b = 1; b < blocks_per_row; ++b) result = combine(result, partial[row * blocks_per_row + b]);
      results[row] = result;
    }
  }
  return results;
}

// clang-format off
template <typename T> struct SumAccumulator { using type = double; };
template <> struct SumAccumulator<int64_t> { using type = int64_t; };
template <> struct SumAccumulator<int32_t> { using type = int64_t; };
template <> struct SumAccumulator<uint8_t> { using type = int64_t; };
template <> struct SumAccumulator<bool> { using type = int64_t; };
// clang-format on
// Integer and bool sums are i64; floating sums keep the input's dtype.
template <typename in_t>
using sum_output_t = std::conditional_t<std::is_same_v<typename SumAccumulator<in_t>::type, int64_t>, int64_t, in_t>;

template <typename acc_t, typename in_t>
acc_t widen(in_t x) {
  return static_cast<acc_t>(static_cast<opmath_t<in_t>>(x));
}

// Folds f(x) over n elements with `combine` (+ or max), starting from `init` (the result for
// n = 0). Eight independent partial results break the dependency from one element to the next,
// so the compiler can vectorise; they are joined in a fixed order, so the result depends on
// nothing but the data.
template <typename acc_t, typename in_t, typename F, typename Combine>
acc_t fold_mapped(const in_t* data, int64_t n, acc_t init, F f, Combine combine) {
  constexpr int kLanes = 8;
  acc_t lanes[kLanes];
  std::fill_n(lanes, kLanes, init);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = combine(lanes[k], f(widen<acc_t>(data[i + k])));
  acc_t result = init;
  for (int k = 0; k < kLanes; ++k) result = combine(result, lanes[k]);
  for (; i < n; ++i) result = combine(result, f(widen<acc_t>(data[i])));
  return result;
}

template <typename acc_t, typename in_t, typename F>
acc_t sum_mapped(const in_t* data, int64_t n, F f) {
  return fold_mapped<acc_t>(data, n, acc_t(0), f, std::plus<acc_t>());
}

// max(a, b) that keeps a NaN from either side.
double max_keeping_nan(double a, double b) { return b > a || b != b ? b : a; }

template <typename in_t, typename F>
double max_mapped(const in_t* data, int64_t n, double init, F f) {
  return fold_mapped<double>(data, n, init, f, max_keeping_nan);
}

// Writes one accumulated value per row into `out`, rounding once.
template <typename out_t, typename acc_t>
void write_rows(const Tensor& out, const std::vector<acc_t>& results) {
  out_t* result = static_cast<out_t*>(out.raw_data());
  for (size_t row = 0; row < results.size(); ++row)
    result[row] = static_cast<out_t>(static_cast<opmath_t<out_t>>(results[row]));
}

template <typename T>
bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(value);
  else return false;
}

// The best element seen so far and its position in the row.
template <typename T>
struct Best {
  T value{};
  int64_t index = 0;
};

// Whether `candidate` (from a later block) replaces `current` as the extremum. A NaN wins and
// is never replaced; equal values do not replace, which keeps the first occurrence.
template <typename T>
bool beats(Extremum which, T candidate, T current) {
  if (is_nan(current)) return false;
  if (is_nan(candidate)) return true;
  return which == Extremum::max ? candidate > current : candidate < current;
}

// The extremum of elements [begin, end) of a row (never empty: the fronts refuse empty dims).
template <typename in_t>
Best<opmath_t<in_t>> extremum_of_block(Extremum which, const in_t* row, int64_t begin, int64_t end) {
  using math_t = opmath_t<in_t>;
  Best<math_t> result{static_cast<math_t>(row[begin]), begin};
  for (int64_t i = begin; i < end; ++i) {
    const math_t value = static_cast<math_t>(row[i]);
    if (is_nan(value)) return {value, i};  // the first NaN beats everything after it
    if (which == Extremum::max ? value > result.value : value < result.value) result = {value, i};
  }
  return result;
}

// Note [Sums over leading dims]
// A Linear layer's bias gradient sums a [B*T, C] gradient over its rows into [C]. As rows (Note
// [Reductions as rows]) that is C rows of length B*T, C elements apart, which as_reduction_rows
// would first copy into place: a transposing copy of the whole gradient. When the kept dims form
// one block of memory with unit stride, sum instead adds the input's rows of that block into
// accumulators of the kept size, reading memory in order and copying nothing. Output c sees the
// rows one after another in a fixed order: the rows are cut into row_blocks_for(rows) blocks,
// fixed by the shape alone; each block adds its rows in order into its own partial sums, and the
// blocks' partial sums are added in block order. Threads take (block, column chunk) items, so
// they decide who computes what but not the order of any addition: any thread count gives the
// same bits.
// The kept block may also have a constant stride (every other column of a wider tensor, say),
// as long as each row's columns lie within its own stretch of memory, before the next row's (or
// the rows are broadcast, stride 0): reading the rows in order still walks memory forward. A
// block whose rows interleave (a transpose: the reduced dim is the contiguous one) reduces as
// rows, which there need no copy.
constexpr int64_t kColumnChunk = 512;  // the accumulators of one item: 4 KB of doubles, in L1
constexpr int64_t kMaxRowBlocks = 8, kMinRowsPerBlock = 64;

int64_t row_blocks_for(int64_t rows) { return std::clamp<int64_t>(rows / kMinRowsPerBlock, 1, kMaxRowBlocks); }

// The input as [rows, columns]: the kept dims are `columns` elements `column_stride` apart, and
// row r (a position in the reduced dims, row-major) starts `row_offsets.get(r)` bytes into the
// input.
struct ColumnLayout {
  int64_t rows = 1, columns = 1, column_stride = 0;
  StridedOffsets<1> row_offsets;
};

// The layout when the kept dims are one block of at least two elements with a constant stride,
// each row's within its own stretch of memory; nullopt otherwise (then the reduction runs as rows).
std::optional<ColumnLayout> as_columns(const Tensor& in, const Shape& dims) {
  if (in.numel() == 0) return std::nullopt;
  std::vector<bool> reduced(in.dim(), false);
  for (int64_t d : dims) reduced[d] = true;
  ColumnLayout layout;
  Shape row_sizes, row_strides;  // the reduced dims, innermost first, merged where they can be
  for (int64_t d = in.dim() - 1; d >= 0; --d) {
    if (in.size(d) == 1) continue;
    if (!reduced[d]) {
      // The innermost kept dim sets the stride; each one outside it must continue the block.
      if (layout.column_stride == 0) layout.column_stride = in.stride(d);
      else if (in.stride(d) != layout.column_stride * layout.columns) return std::nullopt;
      layout.columns *= in.size(d);
    } else if (!row_sizes.empty() && in.stride(d) == row_strides.back() * row_sizes.back()) {
      row_sizes.back() *= in.size(d);  // one dim with the inner one's stride
    } else {
      row_sizes.push_back(in.size(d));
      row_strides.push_back(in.stride(d));
    }
  }
  if (layout.columns < 2 || layout.column_stride < 1 || static_cast<int64_t>(row_sizes.size()) > kMaxStridedDims)
    return std::nullopt;
  for (int64_t stride : row_strides)
    if (stride != 0 && stride < layout.column_stride * layout.columns) return std::nullopt;  // rows interleave
  std::reverse(row_sizes.begin(), row_sizes.end());
  std::reverse(row_strides.begin(), row_strides.end());
  std::array<std::vector<int64_t>, 1> row_byte_strides;
  for (int64_t stride : row_strides) row_byte_strides[0].push_back(stride * in.element_size());
  layout.rows = numel_of(row_sizes);
  layout.row_offsets = StridedOffsets<1>::make(row_sizes, row_byte_strides, "sum");
  return layout;
}

// Adds rows [first_row, last_row) of the input, columns [first_column, first_column + width),
// one row after another into sums[0, width).
template <typename acc_t, typename in_t>
void add_rows(const ColumnLayout& layout, const in_t* data, int64_t first_row, int64_t last_row, int64_t first_column,
              int64_t width, acc_t* sums) {
  for (int64_t r = first_row; r < last_row; ++r) {
    int64_t offset[1];
    layout.row_offsets.get(r, offset);
    const int64_t stride = layout.column_stride;
    const in_t* row =
        reinterpret_cast<const in_t*>(reinterpret_cast<const char*>(data) + offset[0]) + first_column * stride;
    if (stride == 1)  // the usual case, a loop the compiler vectorises
      for (int64_t c = 0; c < width; ++c) sums[c] += widen<acc_t>(row[c]);
    else
      for (int64_t c = 0; c < width; ++c) sums[c] += widen<acc_t>(row[c * stride]);
  }
}

// The sums of the columns (Note [Sums over leading dims]), in acc_t.
template <typename acc_t, typename in_t>
std::vector<acc_t> sum_columns(const ColumnLayout& layout, const in_t* data) {
  const int64_t columns = layout.columns;
  const int64_t blocks = row_blocks_for(layout.rows);
  const int64_t rows_per_block = (layout.rows + blocks - 1) / blocks;
  const int64_t chunks = (columns + kColumnChunk - 1) / kColumnChunk;
  std::vector<acc_t> partial(blocks * columns, acc_t(0));  // block b's sums at [b * columns, (b + 1) * columns)
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / (rows_per_block * std::min(columns, kColumnChunk)));
  parallel_for(blocks * chunks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t block = item / chunks, first_column = (item % chunks) * kColumnChunk;
      add_rows(layout, data, block * rows_per_block, std::min(layout.rows, (block + 1) * rows_per_block), first_column,
               std::min(kColumnChunk, columns - first_column), partial.data() + block * columns + first_column);
    }
  });
  std::vector<acc_t> totals(partial.begin(), partial.begin() + columns);
  for (int64_t block = 1; block < blocks; ++block)
    for (int64_t c = 0; c < columns; ++c) totals[c] += partial[block * columns + c];
  return totals;
}

}  // namespace

void sum(const Tensor& out, const Tensor& in, const Shape& dims) {
  if (const auto layout = as_columns(in, dims)) {
    SG_DISPATCH_ALL(in.dtype(), "sum", [&]<typename in_t>() {
      using acc_t = typename SumAccumulator<in_t>::type;
      write_rows<sum_output_t<in_t>>(out, sum_columns<acc_t>(*layout, static_cast<const in_t*>(in.raw_data())));
    });
    return;
  }
  const ReductionRows r = as_reduction_rows(in, dims);
  SG_DISPATCH_ALL(in.dtype(), "sum", [&]<typename in_t>() {
    using acc_t = typename SumAccumulator<in_t>::type;
    const in_t* data = static_cast<const in_t*>(r.data.raw_data());
    const auto totals = reduce_rows<acc_t>(
        r,
        [&](int64_t row, int64_t begin, int64_t end) {
          return sum_mapped<acc_t>(data + row * r.row_length + begin, end - begin, [](acc_t x) { return x; });
        },
        std::plus<acc_t>());
    write_rows<sum_output_t<in_t>>(out, totals);
  });
}

void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims) {
  const ReductionRows r = as_reduction_rows(in, dims);
  SG_DISPATCH_ALL(in.dtype(), which == Extremum::max ? "max" : "min", [&]<typename in_t>() {
    using math_t = opmath_t<in_t>;
    const in_t* data = static_cast<const in_t*>(r.data.raw_data());
    const auto best = reduce_rows<Best<math_t>>(
        r,
        [&](int64_t row, int64_t begin, int64_t end) {
          return extremum_of_block(which, data + row * r.row_length, begin, end);
        },
        [which](const Best<math_t>& left, const Best<math_t>& right) {
          return beats(which, right.value, left.value) ? right : left;
        });
    if (values.defined()) {
      in_t* value_data = static_cast<in_t*>(values.raw_data());
      for (int64_t row = 0; row < r.rows; ++row) value_data[row] = static_cast<in_t>(best[row].value);
    }
    if (indices.defined()) {
      int64_t* index_data = indices.data_ptr<int64_t>();
      for (int64_t row = 0; row < r.rows; ++row) index_data[row] = best[row].index;
    }
  });
}

void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction) {
  const ReductionRows r = as_reduction_rows(in, dims);
  SG_DISPATCH_FLOATING(in.dtype(), "var", [&]<typename scalar_t>() {
    const scalar_t* data = static_cast<const scalar_t*>(r.data.raw_data());
    // Two passes: the mean first, then squared deviations from it (no cancellation, unlike
    // E[x^2] - E[x]^2).
    std::vector<double> means = reduce_rows<double>(
        r,
        [&](int64_t row, int64_t begin, int64_t end) {
          return sum_mapped<double>(data + row * r.row_length + begin, end - begin, [](double x) { return x; });
        },
        std::plus<double>());
    for (double& mean : means) mean /= static_cast<double>(r.row_length);
    std::vector<double> variances = reduce_rows<double>(
        r,
        [&](int64_t row, int64_t begin, int64_t end) {
          const double mean = means[row];
          return sum_mapped<double>(data + row * r.row_length + begin, end - begin,
                                    [mean](double x) { return (x - mean) * (x - mean); });
        },
        std::plus<double>());
    // As PyTorch: fewer elements than the correction gives a division by zero (inf or NaN).
    const double divisor = static_cast<double>(std::max<int64_t>(r.row_length - correction, 0));
    for (double& variance : variances) variance /= divisor;
    write_rows<scalar_t>(out, variances);
  });
}

void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p) {
  const ReductionRows r = as_reduction_rows(in, dims);
  SG_DISPATCH_FLOATING(in.dtype(), "norm", [&]<typename scalar_t>() {
    const scalar_t* data = static_cast<const scalar_t*>(r.data.raw_data());
    auto row_sums = [&](auto power) {
      return reduce_rows<double>(
          r,
          [&](int64_t row, int64_t begin, int64_t end) {
            return sum_mapped<double>(data + row * r.row_length + begin, end - begin, power);
          },
          std::plus<double>());
    };
    std::vector<double> norms;
    if (std::isinf(p)) {
      norms = reduce_rows<double>(
          r,
          [&](int64_t row, int64_t begin, int64_t end) {
            return max_mapped(data + row * r.row_length + begin, end - begin, 0.0,
                              [](double x) { return std::abs(x); });
          },
          max_keeping_nan);
    } else if (p == 1.0) {
      norms = row_sums([](double x) { return std::abs(x); });
    } else if (p == 2.0) {  // the common case: no pow per element
      norms = row_sums([](double x) { return x * x; });
      for (double& n : norms) n = std::sqrt(n);
    } else {
      norms = row_sums([p](double x) { return std::pow(std::abs(x), p); });
      for (double& n : norms) n = std::pow(n, 1.0 / p);
    }
    write_rows<scalar_t>(out, norms);
  });
}

void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims) {
  const ReductionRows r = as_reduction_rows(in, dims);
  SG_DISPATCH_FLOATING(in.dtype(), "logsumexp", [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const scalar_t* data = static_cast<const scalar_t*>(r.data.raw_data());
    std::vector<double> shifts = reduce_rows<double>(
        r,
        [&](int64_t row, int64_t begin, int64_t end) {
          return max_mapped(data + row * r.row_length + begin, end - begin, -std::numeric_limits<double>::infinity(),
                            [](double x) { return x; });
        },
        max_keeping_nan);
    // An infinite max cannot be subtracted (inf - inf is NaN); shifting by 0 then gives the
    // right answer, since a row holding +inf sums to +inf and a row of -inf sums to 0.
    for (double& shift : shifts)
      if (std::isinf(shift)) shift = 0.0;
    std::vector<double> results = reduce_rows<double>(
        r,
        [&](int64_t row, int64_t begin, int64_t end) {
          const double shift = shifts[row];
          // exp in the input's compute type (a double exp costs 3x a float one), summed in double
          return sum_mapped<double>(data + row * r.row_length + begin, end - begin, [shift](double x) {
            return static_cast<double>(std::exp(static_cast<math_t>(x - shift)));
          });
        },
        std::plus<double>());
    for (int64_t row = 0; row < r.rows; ++row) results[row] = std::log(results[row]) + shifts[row];
    write_rows<scalar_t>(out, results);
  });
}

}  // namespace sg::cpu
