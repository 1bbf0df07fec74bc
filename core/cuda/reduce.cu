// CUDA reductions (sum, max/min, var, norm, logsumexp) over any dims of a strided input, with the
// CPU kernels' semantics (core/kernels/reduce.h): floating sums accumulate in double, integer
// sums in i64, NaN propagates through max/min, ties keep the first index.
//
// Nothing is copied: the input is read in place through two strided walks, one over the output
// positions (the kept dims) and one over the elements of a row (the reduced dims, row-major in
// dim order, which is also how the CPU numbers argmax positions). Rows are reduced as in Note
// [Deterministic GPU row reductions].
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/reduce_kernels.h"
#include "core/strided_offsets.h"

namespace sg::cuda {

namespace {

// The input seen as rows: `kept` maps an output's row index, `reduced` a position within the
// row, each to a byte offset from the input's first element.
struct ReductionWalk {
  StridedOffsets<1> kept, reduced;
  int64_t rows = 1, row_length = 1;
  int64_t innermost_reduced_stride = 0;  // bytes; 0 when the row has no dim left after merging
};

// Row-major positions over `dims` of `in` (in dim order) as byte offsets: size-1 dims dropped,
// a dim merged into the one before it when that one steps exactly over it, so positions still
// count row-major and a contiguous run is one dim.
StridedOffsets<1> walk_over(const Tensor& in, const Shape& dims, const char* op_name) {
  Shape sizes, byte_strides;
  for (int64_t d : dims) {
    const int64_t size = in.size(d), stride = in.stride(d) * static_cast<int64_t>(in.element_size());
    if (size == 1) continue;
    if (!sizes.empty() && byte_strides.back() == size * stride) {
      sizes.back() *= size;
      byte_strides.back() = stride;
      continue;
    }
    sizes.push_back(size);
    byte_strides.push_back(stride);
  }
  return StridedOffsets<1>::make(sizes, {byte_strides}, op_name);
}

ReductionWalk reduction_walk(const Tensor& in, const Shape& dims, const char* op_name) {
  std::vector<bool> is_reduced(in.dim(), false);
  for (int64_t d : dims) is_reduced[d] = true;
  Shape kept_dims;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (!is_reduced[d]) kept_dims.push_back(d);
  ReductionWalk walk{walk_over(in, kept_dims, op_name), walk_over(in, dims, op_name)};
  walk.rows = walk.kept.numel;
  walk.row_length = walk.reduced.numel;
  if (walk.reduced.ndim > 0) walk.innermost_reduced_stride = walk.reduced.byte_strides[walk.reduced.ndim - 1][0];
  return walk;
}

template <typename T>
__device__ const T* element_at(const T* first, const StridedOffsets<1>& walk, int64_t position) {
  int64_t offset[1];
  walk.get(position, offset);
  return reinterpret_cast<const T*>(reinterpret_cast<const char*>(first) + offset[0]);
}

// One block per row for long rows whose neighbouring elements are neighbours in memory (a block's
// threads then read together), or when there are too few rows to keep the GPU busy one thread
// each; otherwise one thread per row, where neighbouring threads read neighbouring outputs' rows.
bool block_per_row(const ReductionWalk& walk, int64_t element_size) {
  const bool long_rows = walk.row_length >= 256;
  const bool row_is_contiguous = walk.row_length <= 1 || walk.innermost_reduced_stride == element_size;
  return long_rows && (row_is_contiguous || walk.rows < 4096);
}

// max(a, b) that keeps a NaN from either side (the CPU's max_keeping_nan).
struct MaxKeepingNan {
  __device__ double operator()(double a, double b) const { return b > a || b != b ? b : a; }
};

// Folds f(element, position) over the row of input elements that starts at `row`.
template <typename acc_t, bool kBlock, typename in_t, typename F, typename Combine>
__device__ acc_t fold_row(const ReductionWalk& walk, const in_t* row, RowThreads<kBlock> threads, acc_t init, F f,
                          Combine combine) {
  return threads.fold(
      walk.row_length, init,
      [&](int64_t j) { return f(static_cast<opmath_t<in_t>>(*element_at(row, walk.reduced, j)), j); }, combine);
}

template <typename in_t, typename out_t, typename acc_t>
struct SumRows {
  ReductionWalk walk;
  const in_t* in;
  out_t* out;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const acc_t total = fold_row<acc_t>(
        walk, element_at(in, walk.kept, r), threads, acc_t(0),
        [](opmath_t<in_t> x, int64_t) { return static_cast<acc_t>(x); }, Plus{});
    if (threads.leader()) out[r] = static_cast<out_t>(static_cast<opmath_t<out_t>>(total));
  }
};

// The best element so far and its position in the row (trivial: it lives in shared memory).
template <typename T>
struct Best {
  T value;
  int64_t index;
};

template <typename T>
__device__ bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>) return value != value;
  else return false;
}

// The preferred of two candidates: a NaN over a number, then the larger (max) or smaller (min)
// value, then the lower index. The choice depends only on the two values and indices, so any
// combining order finds the CPU's answer: the first NaN, else the first extremum.
template <typename T>
struct PickExtremum {
  bool max;
  __device__ Best<T> operator()(const Best<T>& a, const Best<T>& b) const {
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return (max ? a.value > b.value : a.value < b.value) ? a : b;
    return a.index <= b.index ? a : b;
  }
};

template <typename in_t>
struct ExtremumRows {
  using math_t = opmath_t<in_t>;
  ReductionWalk walk;
  const in_t* in;
  in_t* values;      // may be null
  int64_t* indices;  // may be null
  PickExtremum<math_t> pick;
  Best<math_t> none;  // loses to every element (rows are never empty)

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const Best<math_t> best = fold_row<Best<math_t>>(
        walk, element_at(in, walk.kept, r), threads, none,
        [](math_t x, int64_t j) {
          return Best<math_t>{x, j};
        },
        pick);
    if (!threads.leader()) return;
    if (values != nullptr) values[r] = static_cast<in_t>(best.value);
    if (indices != nullptr) indices[r] = best.index;
  }
};

template <typename scalar_t>
struct VarRows {
  ReductionWalk walk;
  const scalar_t* in;
  scalar_t* out;
  double divisor;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const scalar_t* first = element_at(in, walk.kept, r);
    auto identity = [](opmath_t<scalar_t> x, int64_t) { return static_cast<double>(x); };
    // Two passes: the mean, then squared deviations from it (no cancellation, unlike E[x^2] - E[x]^2).
    const double mean =
        fold_row<double>(walk, first, threads, 0.0, identity, Plus{}) / static_cast<double>(walk.row_length);
    const double squares = fold_row<double>(
        walk, first, threads, 0.0,
        [mean](opmath_t<scalar_t> x, int64_t) {
          const double d = static_cast<double>(x) - mean;
          return d * d;
        },
        Plus{});
    if (threads.leader()) out[r] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(squares / divisor));
  }
};

enum class NormKind { inf, one, two, general };

template <typename scalar_t>
struct NormRows {
  ReductionWalk walk;
  const scalar_t* in;
  scalar_t* out;
  NormKind kind;
  double p;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const scalar_t* first = element_at(in, walk.kept, r);
    auto magnitude = [](opmath_t<scalar_t> x, int64_t) { return std::fabs(static_cast<double>(x)); };
    double norm;
    if (kind == NormKind::inf) {
      norm = fold_row<double>(walk, first, threads, 0.0, magnitude, MaxKeepingNan{});
    } else if (kind == NormKind::one) {
      norm = fold_row<double>(walk, first, threads, 0.0, magnitude, Plus{});
    } else if (kind == NormKind::two) {  // the common case: no pow per element
      norm = std::sqrt(fold_row<double>(
          walk, first, threads, 0.0,
          [](opmath_t<scalar_t> x, int64_t) {
            const double d = static_cast<double>(x);
            return d * d;
          },
          Plus{}));
    } else {
      const double power = p;
      norm = std::pow(
          fold_row<double>(
              walk, first, threads, 0.0,
              [power](opmath_t<scalar_t> x, int64_t) { return std::pow(std::fabs(static_cast<double>(x)), power); },
              Plus{}),
          1.0 / power);
    }
    if (threads.leader()) out[r] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(norm));
  }
};

template <typename scalar_t>
struct LogSumExpRows {
  using math_t = opmath_t<scalar_t>;
  ReductionWalk walk;
  const scalar_t* in;
  scalar_t* out;

  template <bool kBlock>
  __device__ void row(int64_t r, RowThreads<kBlock> threads) const {
    const scalar_t* first = element_at(in, walk.kept, r);
    double shift = fold_row<double>(
        walk, first, threads, -INFINITY, [](math_t x, int64_t) { return static_cast<double>(x); }, MaxKeepingNan{});
    // An infinite max cannot be subtracted (inf - inf is NaN); shifting by 0 then gives the
    // right answer, since a row holding +inf sums to +inf and a row of -inf sums to 0.
    if (std::isinf(shift)) shift = 0.0;
    // exp in the input's compute type, as on the CPU; the sum in double
    const double total = fold_row<double>(
        walk, first, threads, 0.0,
        [shift](math_t x, int64_t) {
          return static_cast<double>(std::exp(static_cast<math_t>(static_cast<double>(x) - shift)));
        },
        Plus{});
    if (threads.leader()) out[r] = static_cast<scalar_t>(static_cast<math_t>(std::log(total) + shift));
  }
};

template <typename in_t, typename RowOp>
void launch(const ReductionWalk& walk, const RowOp& op) {
  launch_rows(walk.rows, walk.row_length, block_per_row(walk, sizeof(in_t)), op);
}

template <typename T>
const T* input_data(const Tensor& in) {
  return static_cast<const T*>(in.raw_data());
}
template <typename T>
T* output_data(const Tensor& out) {
  return out.defined() ? static_cast<T*>(out.raw_data()) : nullptr;
}

template <typename in_t>
void sum_typed(const Tensor& out, const Tensor& in, const ReductionWalk& walk) {
  if constexpr (std::is_floating_point_v<opmath_t<in_t>>) {
    launch<in_t>(walk, SumRows<in_t, in_t, double>{walk, input_data<in_t>(in), output_data<in_t>(out)});
  } else {  // integers and bool sum into i64
    launch<in_t>(walk, SumRows<in_t, int64_t, int64_t>{walk, input_data<in_t>(in), output_data<int64_t>(out)});
  }
}

// The value every element beats: -inf (max) or +inf (min) where the type has infinities.
template <typename T>
T worst_value(Extremum which) {
  using limits = std::numeric_limits<T>;
  if constexpr (limits::has_infinity) return which == Extremum::max ? -limits::infinity() : limits::infinity();
  else return which == Extremum::max ? limits::lowest() : limits::max();
}

template <typename in_t>
void extremum_typed(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in,
                    const ReductionWalk& walk) {
  using math_t = opmath_t<in_t>;
  const PickExtremum<math_t> pick{which == Extremum::max};
  const Best<math_t> none{worst_value<math_t>(which), std::numeric_limits<int64_t>::max()};
  launch<in_t>(walk, ExtremumRows<in_t>{walk, input_data<in_t>(in), output_data<in_t>(values),
                                        output_data<int64_t>(indices), pick, none});
}

}  // namespace

void sum(const Tensor& out, const Tensor& in, const Shape& dims) {
  const DeviceGuard guard(in.device().index);
  const ReductionWalk walk = reduction_walk(in, dims, "sum");
  SG_DISPATCH_ALL(in.dtype(), "sum", [&]<typename in_t>() { sum_typed<in_t>(out, in, walk); });
}

void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims) {
  const char* name = which == Extremum::max ? "max" : "min";
  const DeviceGuard guard(in.device().index);
  const ReductionWalk walk = reduction_walk(in, dims, name);
  SG_DISPATCH_ALL(in.dtype(), name, [&]<typename in_t>() { extremum_typed<in_t>(which, values, indices, in, walk); });
}

void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction) {
  const DeviceGuard guard(in.device().index);
  const ReductionWalk walk = reduction_walk(in, dims, "var");
  // As PyTorch: fewer elements than the correction gives a division by zero (inf or NaN).
  const double divisor = static_cast<double>(std::max<int64_t>(walk.row_length - correction, 0));
  SG_DISPATCH_FLOATING(in.dtype(), "var", [&]<typename scalar_t>() {
    launch<scalar_t>(walk, VarRows<scalar_t>{walk, input_data<scalar_t>(in), output_data<scalar_t>(out), divisor});
  });
}

void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p) {
  const DeviceGuard guard(in.device().index);
  const ReductionWalk walk = reduction_walk(in, dims, "norm");
  const NormKind kind = std::isinf(p) ? NormKind::inf
                        : p == 1.0    ? NormKind::one
                        : p == 2.0    ? NormKind::two
                                      : NormKind::general;
  SG_DISPATCH_FLOATING(in.dtype(), "norm", [&]<typename scalar_t>() {
    launch<scalar_t>(walk, NormRows<scalar_t>{walk, input_data<scalar_t>(in), output_data<scalar_t>(out), kind, p});
  });
}

void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims) {
  const DeviceGuard guard(in.device().index);
  const ReductionWalk walk = reduction_walk(in, dims, "logsumexp");
  SG_DISPATCH_FLOATING(in.dtype(), "logsumexp", [&]<typename scalar_t>() {
    launch<scalar_t>(walk, LogSumExpRows<scalar_t>{walk, input_data<scalar_t>(in), output_data<scalar_t>(out)});
  });
}

}  // namespace sg::cuda
