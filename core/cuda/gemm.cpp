// The CUDA GEMM: cuBLAS's cublasGemmStridedBatchedEx for every floating dtype, f16/bf16 with f32
// accumulation. Operand layouts follow Note [GEMM operand layouts] (core/cpu/gemm.cpp): views
// with a unit stride in one matrix dim go to cuBLAS as they are, anything else is copied once.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "core/cuda/cublas.h"
#include "core/cuda/gemm_kernels.h"
#include "core/cuda_runtime/runtime.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"

namespace sg::cuda {

namespace {

// Note [cuBLAS is column-major]
// cuBLAS reads matrices column-major: a row-major X [r, c] with row stride ld is, to cuBLAS, the
// matrix X^T [c, r] with leading dimension ld. So out = a @ b is asked for as out^T = b^T @ a^T:
// cuBLAS's first operand is b, its second a, and its (m, n) are our (n, m). An operand stored
// transposed (unit stride down its rows, e.g. x.t() of a contiguous x) reads to cuBLAS as X itself
// and goes in with CUBLAS_OP_T; `out` has no such flag and must be stored row-major.
struct Operand {
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;  // the stride of the matrix dim that is not the unit-stride one
};

// The layout of the last two dims of `t`; a size-1 dim may have any stride (it is never stepped).
std::optional<Operand> operand_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), row_stride = t.stride(-2), col_stride = t.stride(-1);
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1)))
    return Operand{CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1)))
    return Operand{CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

Tensor view_of(const Tensor& t, Shape sizes, Shape strides) {
  return Tensor(
      std::make_shared<TensorImpl>(t.storage(), t.storage_offset(), std::move(sizes), std::move(strides), t.dtype()));
}

// `t` with contiguous matrices; batch dims that `t` broadcasts keep stride 0 (copied once).
Tensor compact_copy(const Tensor& t) {
  Shape source_sizes = t.sizes();
  const int64_t batch_dims = t.dim() - 2;
  for (int64_t d = 0; d < batch_dims; ++d)
    if (t.stride(d) == 0) source_sizes[d] = 1;
  Tensor copy = empty(source_sizes, {t.dtype(), t.device()});
  kernels::copy(copy, view_of(t, source_sizes, t.strides()));
  Shape strides = copy.strides();
  for (int64_t d = 0; d < batch_dims; ++d)
    if (t.stride(d) == 0) strides[d] = 0;
  return view_of(copy, t.sizes(), strides);
}

// The batch dims of out, a and b, merged wherever all three step evenly across neighbouring dims
// (a contiguous batch, or an operand broadcast over several dims), so the usual products are one
// strided-batched call. strides[i] holds {out, a, b}'s strides of merged dim i.
struct Batch {
  Shape sizes;
  std::vector<std::array<int64_t, 3>> strides;
};

Batch merged_batch(const Tensor& out, const Tensor& a, const Tensor& b) {
  Batch batch;
  for (int64_t d = 0; d < out.dim() - 2; ++d) {
    if (out.size(d) == 1) continue;
    const std::array<int64_t, 3> strides{out.stride(d), a.stride(d), b.stride(d)};
    bool merges = !batch.sizes.empty();
    for (int i = 0; i < 3 && merges; ++i) merges = batch.strides.back()[i] == strides[i] * out.size(d);
    if (merges) {
      batch.sizes.back() *= out.size(d);
      batch.strides.back() = strides;
    } else {
      batch.sizes.push_back(out.size(d));
      batch.strides.push_back(strides);
    }
  }
  return batch;
}

cudaDataType cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f64: return CUDA_R_64F;
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: break;
  }
  SG_FAIL("gemm: CUDA multiplies floating matrices only (cuBLAS has no ", dtype,
          " product), as PyTorch; convert the operands to a floating dtype or compute on the CPU");
}

int to_int(int64_t value, const Tensor& a, const Tensor& b) {
  SG_CHECK(value <= std::numeric_limits<int>::max(), "gemm: dimension, leading dimension or batch count ", value,
           " exceeds cuBLAS's int range (a ", shape_str(a.sizes()), ", b ", shape_str(b.sizes()), ")");
  return static_cast<int>(value);
}

char* element(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.raw_data()) + offset * static_cast<int64_t>(t.element_size());
}

// One cuBLAS call per combination of the outer merged batch dims, batched over the innermost one.
void gemm_cublas(const Tensor& out, const Tensor& a_in, const Tensor& b_in, double alpha, double beta) {
  const Tensor a = operand_layout(a_in) ? a_in : compact_copy(a_in);
  const Tensor b = operand_layout(b_in) ? b_in : compact_copy(b_in);
  const Operand la = *operand_layout(a), lb = *operand_layout(b), lc = *operand_layout(out);
  const cudaDataType operand_type = cuda_type(a.dtype()), out_type = cuda_type(out.dtype());
  const bool is_f64 = out.dtype() == DType::f64;
  // f16/bf16 and f32 accumulate in f32 (TF32 products of f32 operands only when allowed), f64 in
  // f64; alpha and beta have the compute type.
  const cublasComputeType_t compute = is_f64                                    ? CUBLAS_COMPUTE_64F
                                      : a.dtype() == DType::f32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                : CUBLAS_COMPUTE_32F;
  const double alpha_f64 = alpha, beta_f64 = beta;
  const float alpha_f32 = static_cast<float>(alpha), beta_f32 = static_cast<float>(beta);
  const void* alpha_ptr = is_f64 ? static_cast<const void*>(&alpha_f64) : &alpha_f32;
  const void* beta_ptr = is_f64 ? static_cast<const void*>(&beta_f64) : &beta_f32;

  Batch batch = merged_batch(out, a, b);
  if (batch.sizes.empty()) {
    batch.sizes.push_back(1);
    batch.strides.push_back({0, 0, 0});
  }
  const int64_t inner = batch.sizes.back();
  const std::array<int64_t, 3> inner_strides = batch.strides.back();
  int64_t outer_count = 1;
  for (size_t d = 0; d + 1 < batch.sizes.size(); ++d) outer_count *= batch.sizes[d];

  const int m = to_int(out.size(-2), a, b), n = to_int(out.size(-1), a, b), k = to_int(a.size(-1), a, b);
  const int lda = to_int(la.ld, a, b), ldb = to_int(lb.ld, a, b), ldc = to_int(lc.ld, a, b);
  const int count = to_int(inner, a, b);
  DeviceGuard guard(out.device().index);
  cublasHandle_t handle = cublas_handle(out.device().index);
  for (int64_t outer = 0; outer < outer_count; ++outer) {
    std::array<int64_t, 3> offsets{0, 0, 0};  // out, a, b
    int64_t rest = outer;
    for (int64_t d = static_cast<int64_t>(batch.sizes.size()) - 2; d >= 0; --d) {
      const int64_t index = rest % batch.sizes[d];
      rest /= batch.sizes[d];
      for (int i = 0; i < 3; ++i) offsets[i] += index * batch.strides[d][i];
    }
    // Note [cuBLAS is column-major]: out^T = b^T @ a^T.
    SG_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(
        handle, lb.op, la.op, n, m, k, alpha_ptr, element(b, offsets[2]), operand_type, ldb, inner_strides[2],
        element(a, offsets[1]), operand_type, lda, inner_strides[1], beta_ptr, element(out, offsets[0]), out_type, ldc,
        inner_strides[0], count, compute, CUBLAS_GEMM_DEFAULT));
  }
}

void check_gemm_arguments(const Tensor& out, const Tensor& a, const Tensor& b) {
  SG_CHECK(a.dim() >= 2 && a.dim() == b.dim() && a.dim() == out.dim(), "gemm: expected operands of one rank >= 2: out ",
           shape_str(out.sizes()), " = a ", shape_str(a.sizes()), " @ b ", shape_str(b.sizes()));
  const bool f32_out_of_16_bit = out.dtype() == DType::f32 && (a.dtype() == DType::f16 || a.dtype() == DType::bf16);
  SG_CHECK(a.dtype() == b.dtype() && (a.dtype() == out.dtype() || f32_out_of_16_bit), "gemm: mixed dtypes ",
           out.dtype(), " = ", a.dtype(), " @ ", b.dtype());
  SG_CHECK(a.device() == out.device() && b.device() == out.device(), "gemm: operands on different devices: out on ",
           out.device(), ", a on ", a.device(), ", b on ", b.device());
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  check_gemm_arguments(out, a, b);
  cuda_type(out.dtype());  // an integer product fails here, before any work
  if (out.numel() == 0) return;
  if (a.size(-1) == 0) {  // an empty sum: only the beta term remains
    if (beta == 0) kernels::fill(out, 0.0);
    else kernels::binary(BinaryOp::mul, out, out, full({}, beta, {out.dtype(), out.device()}));
    return;
  }
  const auto out_layout = operand_layout(out);
  if (out_layout && out_layout->op == CUBLAS_OP_N) return gemm_cublas(out, a, b, alpha, beta);
  // cuBLAS writes row-major matrices only (Note [cuBLAS is column-major]): compute into a
  // contiguous temporary and copy it into out.
  Tensor result = empty(out.sizes(), {out.dtype(), out.device()});
  if (beta != 0) kernels::copy(result, out);
  gemm_cublas(result, a, b, alpha, beta);
  kernels::copy(out, result);
}

}  // namespace sg::cuda
