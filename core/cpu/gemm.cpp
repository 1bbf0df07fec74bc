// The CPU GEMM. f32 calls oneDNN's sgemm on CPUs with AVX-512 and OpenBLAS elsewhere, f64 calls
// OpenBLAS, with the kernels chosen for this CPU (core/cpu/blas.h; docs/performance.md measures why
// these and not Eigen); f16 and bf16 are computed in f32 and rounded once; integers, and every dtype
// where OpenBLAS is not available, use Eigen's product.
#include <Eigen/Core>  // defines: Eigen::Map, Eigen::Matrix, Eigen::Stride

#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cpu/gemm_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

// Note [GEMM operand layouts]
// Row-major BLAS reads an r x c matrix that has a unit stride in one dim: element (i, j) at
// i * ld + j (stored as it is), or at j * ld + i (stored transposed: passed with a trans flag).
// A transpose view, a column range or a row range of a contiguous tensor all fit, so they are
// handed to BLAS without a copy. Only a matrix with no unit stride (a strided slice such as
// x[:, ::2], or an expanded row) is copied, once for the whole batch, and batch dims broadcast
// with stride 0 stay broadcast in the copy. `out` must be stored as it is (no trans flag exists
// for C); any other out is computed into a temporary and copied back.
struct MatrixLayout {
  bool transposed = false;
  int64_t ld = 0;  // BLAS's leading dimension: the stride of the dim without the unit stride
};

// The layout of the last two dims of `t` (the same for every matrix of the batch); a size-1 dim
// may have any stride, since it is never stepped over.
std::optional<MatrixLayout> matrix_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), row_stride = t.stride(-2), col_stride = t.stride(-1);
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1)))
    return MatrixLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1)))
    return MatrixLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

bool is_blas_output(const Tensor& out) {
  const auto layout = matrix_layout(out);
  return layout && !layout->transposed;
}

Tensor view_of(const Tensor& t, Shape sizes, Shape strides) {
  return Tensor(
      std::make_shared<TensorImpl>(t.storage(), t.storage_offset(), std::move(sizes), std::move(strides), t.dtype()));
}

// `t` copied into `dtype` with contiguous matrices; batch dims that `t` broadcasts keep stride 0,
// so an operand expanded over the batch is copied once, not once per batch entry.
Tensor compact_copy(const Tensor& t, DType dtype) {
  Shape source_sizes = t.sizes();
  const int64_t batch_dims = t.dim() - 2;
  for (int64_t d = 0; d < batch_dims; ++d)
    if (t.stride(d) == 0) source_sizes[d] = 1;
  Tensor copy = empty(source_sizes, {dtype, t.device()});
  kernels::copy(copy, view_of(t, source_sizes, t.strides()));
  Shape strides = copy.strides();
  for (int64_t d = 0; d < batch_dims; ++d)
    if (t.stride(d) == 0) strides[d] = 0;
  return view_of(copy, t.sizes(), strides);
}

// Element offset of every matrix of a batched operand, in row-major batch order.
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t batch_dims = t.dim() - 2;
  int64_t count = 1;
  for (int64_t d = 0; d < batch_dims; ++d) count *= t.size(d);
  std::vector<int64_t> offsets(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0;
    for (int64_t d = batch_dims - 1; d >= 0; --d) {
      offset += (rest % t.size(d)) * t.stride(d);
      rest /= t.size(d);
    }
    offsets[i] = offset;
  }
  return offsets;
}

// OpenBLAS runs one GEMM on one thread below this many multiply-adds (its
// GEMM_MULTITHREAD_THRESHOLD of 4 x 65536), so below it our pool takes the batch instead.
constexpr int64_t kSmallGemm = 4 * 65536;

// Calls product(a_offset, b_offset, out_offset) for every matrix of the batch. Each product is
// multithreaded by the library itself (OpenBLAS's OpenMP build and Eigen both use our pool), so
// the batch is split across threads only when each product is small enough to run on one thread:
// never both, since nested OpenMP regions would oversubscribe the cores.
template <typename Product>
void for_each_matrix(const Tensor& out, const Tensor& a, const Tensor& b, const Product& product) {
  const std::vector<int64_t> out_offsets = batch_offsets(out), a_offsets = batch_offsets(a),
                             b_offsets = batch_offsets(b);
  const int64_t count = static_cast<int64_t>(out_offsets.size());
  const auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) product(a_offsets[i], b_offsets[i], out_offsets[i]);
  };
  const int64_t work = out.size(-2) * out.size(-1) * a.size(-1);
  if (count > 1 && work <= kSmallGemm) {
    parallel_for(count, std::max<int64_t>(1, kParallelGrain / work), run);
  } else {
    run(0, count);
  }
}

void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
               int ldb, float beta, float* c, int ldc) {
  blas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
               int ldb, double beta, double* c, int ldc) {
  blas_dgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_through_temporary(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                            DType dtype);

template <typename T>  // float or double
void gemm_blas(const Tensor& out, const Tensor& a_in, const Tensor& b_in, double alpha, double beta) {
  if (!is_blas_output(out)) return gemm_through_temporary(out, a_in, b_in, alpha, beta, out.dtype());
  const Tensor a = matrix_layout(a_in) ? a_in : compact_copy(a_in, a_in.dtype());
  const Tensor b = matrix_layout(b_in) ? b_in : compact_copy(b_in, b_in.dtype());
  const MatrixLayout la = *matrix_layout(a), lb = *matrix_layout(b), lc = *matrix_layout(out);
  for (int64_t value : {out.size(-2), out.size(-1), a.size(-1), la.ld, lb.ld, lc.ld})
    SG_CHECK(value <= std::numeric_limits<int>::max(), "gemm: dimension or leading dimension ", value,
             " exceeds the BLAS integer range (a ", shape_str(a.sizes()), ", b ", shape_str(b.sizes()), ")");
  const int m = static_cast<int>(out.size(-2)), n = static_cast<int>(out.size(-1)), k = static_cast<int>(a.size(-1));
  const T* a_data = a.data_ptr<T>();
  const T* b_data = b.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  for_each_matrix(out, a, b, [&](int64_t a_offset, int64_t b_offset, int64_t out_offset) {
    blas_gemm(la.transposed, lb.transposed, m, n, k, static_cast<T>(alpha), a_data + a_offset, static_cast<int>(la.ld),
              b_data + b_offset, static_cast<int>(lb.ld), static_cast<T>(beta), out_data + out_offset,
              static_cast<int>(lc.ld));
  });
}

// Integer products are not on any model's hot path; Eigen reads every stride directly. Also the
// f32/f64 path where OpenBLAS is not there (or SG_BLAS=eigen).
template <typename T>
void gemm_eigen(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strides = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  const auto map = [](auto* data, const Tensor& t) {
    using Target = std::conditional_t<std::is_const_v<std::remove_pointer_t<decltype(data)>>, const Matrix, Matrix>;
    return Eigen::Map<Target, Eigen::Unaligned, Strides>(data, t.size(-2), t.size(-1),
                                                         Strides(t.stride(-2), t.stride(-1)));
  };
  const T* a_data = a.data_ptr<T>();
  const T* b_data = b.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  for_each_matrix(out, a, b, [&](int64_t a_offset, int64_t b_offset, int64_t out_offset) {
    auto result = map(out_data + out_offset, out);
    if (beta == 0) result.setZero();
    else if (beta != 1) result *= static_cast<T>(beta);
    result.noalias() += static_cast<T>(alpha) * (map(a_data + a_offset, a) * map(b_data + b_offset, b));
  });
}

// Computes into a contiguous `dtype` temporary and copies it into out, rounding once: the path of
// f16/bf16 (computed in f32) and of an out that BLAS cannot write (Note [GEMM operand layouts]).
void gemm_through_temporary(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                            DType dtype) {
  Tensor result = empty(out.sizes(), {dtype, out.device()});
  if (beta != 0) kernels::copy(result, out);
  cpu::gemm(result, a.dtype() == dtype ? a : compact_copy(a, dtype), b.dtype() == dtype ? b : compact_copy(b, dtype),
            alpha, beta);
  kernels::copy(out, result);
}

void check_gemm_arguments(const Tensor& out, const Tensor& a, const Tensor& b) {
  const auto shapes = [&] {
    return detail::concat(": out ", shape_str(out.sizes()), " = a ", shape_str(a.sizes()), " @ b ",
                          shape_str(b.sizes()));
  };
  SG_CHECK(a.dim() >= 2 && a.dim() == b.dim() && a.dim() == out.dim(), "gemm: expected operands of one rank >= 2",
           shapes());
  bool shapes_match = a.size(-1) == b.size(-2) && out.size(-2) == a.size(-2) && out.size(-1) == b.size(-1);
  for (int64_t d = 0; d < out.dim() - 2; ++d)
    shapes_match = shapes_match && a.size(d) == out.size(d) && b.size(d) == out.size(d);
  SG_CHECK(shapes_match, "gemm: mismatched shapes", shapes());
  SG_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "gemm: mixed dtypes ", out.dtype(), " = ", a.dtype(),
           " @ ", b.dtype(), shapes());
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  check_gemm_arguments(out, a, b);
  if (out.numel() == 0) return;
  if (a.size(-1) == 0) {  // an empty sum: only the beta term remains
    if (beta == 0) kernels::fill(out, 0.0);
    else kernels::binary(BinaryOp::mul, out, out, full({}, beta, {out.dtype(), out.device()}));
    return;
  }
  SG_DISPATCH_NUMERIC(out.dtype(), "gemm", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (blas_available()) gemm_blas<T>(out, a, b, alpha, beta);
      else gemm_eigen<T>(out, a, b, alpha, beta);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      gemm_through_temporary(out, a, b, alpha, beta, DType::f32);
    } else {
      gemm_eigen<T>(out, a, b, alpha, beta);
    }
  });
}

}  // namespace sg::cpu
