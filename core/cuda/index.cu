// CUDA indexing kernels. gather and index_select read through any strides, one thread per output
// element; scatter_add gives each thread one position p off `dim` and walks j = 0, 1, ... as the
// CPU does (Note [Indexing along a dim], core/cpu/index.cpp), and index_add gives each thread one
// destination element and adds its source rows in increasing j, so duplicates accumulate in the
// CPU's order and no float is ever added atomically: the results are the CPU's, bit for bit.
#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <vector>

#include "core/cuda/index_kernels.h"
#include "core/cuda/launch.cuh"
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/strided_offsets.h"

namespace sg::cuda {

namespace {

// ---- index_range: a min/max reduction whose two results are copied back ----

__device__ inline int64_t warp_min(int64_t v) {
  for (int delta = 16; delta > 0; delta /= 2) v = min(v, static_cast<int64_t>(__shfl_down_sync(0xffffffffu, v, delta)));
  return v;
}
__device__ inline int64_t warp_max(int64_t v) {
  for (int delta = 16; delta > 0; delta /= 2) v = max(v, static_cast<int64_t>(__shfl_down_sync(0xffffffffu, v, delta)));
  return v;
}

// range[0] = min, range[1] = max over a contiguous index; integer atomics, so any order gives one result.
template <typename index_t>
__global__ void index_range_kernel(const index_t* index, int64_t n, long long* range) {
  int64_t lowest = LLONG_MAX, highest = LLONG_MIN;
  for (int64_t i = grid_first(); i < n; i += grid_step()) {
    const int64_t value = index[i];
    lowest = min(lowest, value);
    highest = max(highest, value);
  }
  lowest = warp_min(lowest);
  highest = warp_max(highest);
  if (threadIdx.x % 32 == 0) {
    atomicMin(&range[0], static_cast<long long>(lowest));
    atomicMax(&range[1], static_cast<long long>(highest));
  }
}

// ---- gather, index_select, scatter_add: walking an index along `dim` ----

// The byte offsets of self (the indexed tensor: gather's input, scatter's destination), index and
// other (gather's output, scatter's source) over a shape, with self's stride along `dim` left out:
// the index value supplies that coordinate, times self_dim_stride.
struct AlongDim {
  StridedOffsets<3> offsets;
  int64_t self_dim_stride = 0, index_dim_stride = 0, other_dim_stride = 0;  // bytes
  int64_t length = 1;                                                       // index.size(dim)
};

// keep_dim: the shape is index's whole shape (one thread per position); otherwise `dim` is dropped
// from it (one thread per p, walking j itself).
AlongDim along_dim(const Tensor& self, const Tensor& index, const Tensor& other, int64_t dim, bool keep_dim,
                   const char* op_name) {
  const std::array<const Tensor*, 3> tensors{&self, &index, &other};
  AlongDim result;
  Shape shape;
  std::array<std::vector<int64_t>, 3> strides;
  for (int64_t d = 0; d < index.dim(); ++d) {
    std::array<int64_t, 3> bytes;
    for (int k = 0; k < 3; ++k) bytes[k] = tensors[k]->stride(d) * static_cast<int64_t>(tensors[k]->element_size());
    if (d == dim) {
      result.self_dim_stride = bytes[0];
      result.index_dim_stride = bytes[1];
      result.other_dim_stride = bytes[2];
      result.length = index.size(d);
      if (!keep_dim) continue;
      bytes[0] = 0;
    }
    shape.push_back(index.size(d));
    for (int k = 0; k < 3; ++k) strides[k].push_back(bytes[k]);
  }
  result.offsets = StridedOffsets<3>::make(shape, strides, op_name);
  return result;
}

template <typename scalar_t, typename index_t>
__global__ void gather_kernel(const char* x, const char* index, char* out, AlongDim walk) {
  for (int64_t position = grid_first(); position < walk.offsets.numel; position += grid_step()) {
    int64_t offset[3];
    walk.offsets.get(position, offset);
    const int64_t i = *reinterpret_cast<const index_t*>(index + offset[1]);
    *reinterpret_cast<scalar_t*>(out + offset[2]) =
        *reinterpret_cast<const scalar_t*>(x + offset[0] + i * walk.self_dim_stride);
  }
}

template <typename scalar_t, typename index_t>
__global__ void scatter_add_kernel(char* dst, const char* index, const char* src, AlongDim walk) {
  using acc_t = opmath_t<scalar_t>;
  for (int64_t p = grid_first(); p < walk.offsets.numel; p += grid_step()) {
    int64_t offset[3];
    walk.offsets.get(p, offset);
    for (int64_t j = 0; j < walk.length; ++j) {
      const int64_t i = *reinterpret_cast<const index_t*>(index + offset[1] + j * walk.index_dim_stride);
      scalar_t& target = *reinterpret_cast<scalar_t*>(dst + offset[0] + i * walk.self_dim_stride);
      const scalar_t addend = *reinterpret_cast<const scalar_t*>(src + offset[2] + j * walk.other_dim_stride);
      target = scalar_t(acc_t(target) + acc_t(addend));  // rounded per addition, as the CPU kernel
    }
  }
}

template <typename scalar_t, typename index_t>
void gather_typed(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const AlongDim walk = along_dim(x, index, out, dim, /*keep_dim=*/true, "gather");
  gather_kernel<scalar_t, index_t><<<grid_for(walk.offsets.numel), kBlockThreads, 0, compute_stream()>>>(
      static_cast<const char*>(x.raw_data()), static_cast<const char*>(index.raw_data()),
      static_cast<char*>(out.raw_data()), walk);
  SG_CUDA_CHECK_LAUNCH();
}

template <typename scalar_t, typename index_t>
void scatter_add_typed(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  const AlongDim walk = along_dim(dst, index, src, dim, /*keep_dim=*/false, "scatter_add");
  scatter_add_kernel<scalar_t, index_t><<<grid_for(walk.offsets.numel), kBlockThreads, 0, compute_stream()>>>(
      static_cast<char*>(dst.raw_data()), static_cast<const char*>(index.raw_data()),
      static_cast<const char*>(src.raw_data()), walk);
  SG_CUDA_CHECK_LAUNCH();
}

// ---- index_add: source rows grouped by destination row ----

// Thread per destination element (o, d, k) of [outer, size, inner]: adds source rows
// order[first[d]], ..., order[first[d + 1] - 1] (increasing j) in acc_t and stores once, as the
// CPU kernel does row by row.
template <typename scalar_t>
__global__ void index_add_kernel(scalar_t* dst, const scalar_t* src, const int64_t* first, const int64_t* order,
                                 kernels::RowLayout layout, int64_t count) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t total = layout.outer * layout.size * layout.inner;
  for (int64_t e = grid_first(); e < total; e += grid_step()) {
    const int64_t k = e % layout.inner, d = (e / layout.inner) % layout.size, o = e / (layout.inner * layout.size);
    const int64_t begin = first[d], end = first[d + 1];
    if (begin == end) continue;
    acc_t sum = acc_t(dst[e]);
    for (int64_t t = begin; t < end; ++t) sum = sum + acc_t(src[(o * count + order[t]) * layout.inner + k]);
    dst[e] = scalar_t(sum);
  }
}

template <typename scalar_t>
void launch_index_add(const Tensor& dst, const Tensor& source, const Tensor& first, const Tensor& order,
                      const kernels::RowLayout& layout, int64_t count) {
  index_add_kernel<scalar_t><<<grid_for(dst.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<scalar_t*>(dst.raw_data()), static_cast<const scalar_t*>(source.raw_data()),
      first.data_ptr<int64_t>(), order.data_ptr<int64_t>(), layout, count);
  SG_CUDA_CHECK_LAUNCH();
}

// A host vector of i64 as a tensor on `device`.
Tensor to_device(const std::vector<int64_t>& values, Device device) {
  const Tensor host = from_blob(const_cast<int64_t*>(values.data()), {static_cast<int64_t>(values.size())}, DType::i64);
  Tensor result = empty(host.sizes(), {DType::i64, device});
  kernels::copy(result, host);
  return result;
}

// ---- triangle, one_hot ----

template <typename scalar_t>
__global__ void triangle_kernel(char* out, const char* x, StridedOffsets<2> offsets, int64_t rows, int64_t cols,
                                int64_t diagonal, bool lower) {
  for (int64_t e = grid_first(); e < offsets.numel; e += grid_step()) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    int64_t offset[2];
    offsets.get(e, offset);
    const bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
    *reinterpret_cast<scalar_t*>(out + offset[0]) =
        keep ? *reinterpret_cast<const scalar_t*>(x + offset[1]) : scalar_t(0);
  }
}

template <typename scalar_t>
void launch_triangle(const Tensor& out, const Tensor& x, const StridedOffsets<2>& offsets, int64_t rows, int64_t cols,
                     int64_t diagonal, bool lower) {
  triangle_kernel<scalar_t><<<grid_for(out.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<char*>(out.raw_data()), static_cast<const char*>(x.raw_data()), offsets, rows, cols, diagonal, lower);
  SG_CUDA_CHECK_LAUNCH();
}

template <typename index_t>
__global__ void one_hot_kernel(int64_t* out, const index_t* indices, int64_t n, int64_t classes) {
  for (int64_t i = grid_first(); i < n; i += grid_step()) out[i * classes + indices[i]] = 1;
}

}  // namespace

std::pair<int64_t, int64_t> index_range(const Tensor& index) {
  const DeviceGuard guard(index.device().index);
  const Tensor flat = kernels::contiguous(index);
  const int64_t n = flat.numel();
  // Written by the host first: min starts at the largest value, max at the smallest.
  const Tensor range = empty({2}, {DType::i64, index.device()});
  const long long start[2] = {LLONG_MAX, LLONG_MIN};
  SG_CUDA_CHECK(cudaMemcpyAsync(range.raw_data(), start, sizeof(start), cudaMemcpyHostToDevice, compute_stream()));
  kernels::dispatch_index(index.dtype(), [&]<typename index_t>() {
    index_range_kernel<index_t><<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(
        static_cast<const index_t*>(flat.raw_data()), n, static_cast<long long*>(range.raw_data()));
    SG_CUDA_CHECK_LAUNCH();
  });
  long long result[2];
  SG_CUDA_CHECK(cudaMemcpyAsync(result, range.raw_data(), sizeof(result), cudaMemcpyDeviceToHost, compute_stream()));
  SG_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
  return {result[0], result[1]};
}

void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device().index);
  SG_DISPATCH_ALL(x.dtype(), "gather", [&]<typename scalar_t>() {
    kernels::dispatch_index(index.dtype(),
                            [&]<typename index_t>() { gather_typed<scalar_t, index_t>(out, x, dim, index); });
  });
}

void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  // The 1-D (or 0-dim) index seen as a tensor of out's shape that varies only along `dim`: then
  // index_select is a gather, which reads x through any strides.
  Shape strides(out.dim(), 0);
  strides[dim] = index.dim() == 0 ? 0 : index.stride(0);
  const Tensor along(
      std::make_shared<TensorImpl>(index.storage(), index.storage_offset(), out.sizes(), strides, index.dtype()));
  gather(out, x, dim, along);
}

void scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  const DeviceGuard guard(dst.device().index);
  SG_DISPATCH_NUMERIC(dst.dtype(), "scatter_add", [&]<typename scalar_t>() {
    kernels::dispatch_index(index.dtype(),
                            [&]<typename index_t>() { scatter_add_typed<scalar_t, index_t>(dst, dim, index, src); });
  });
}

void index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t count = index.numel();
  if (count == 0 || dst.numel() == 0) return;
  const DeviceGuard guard(dst.device().index);
  const Tensor source = kernels::contiguous(src);
  const kernels::RowLayout layout = kernels::row_layout(dst.sizes(), dim);
  // Group the source rows by the destination row they add into (a stable counting sort, on the
  // host as in the CPU kernel; the index front has just read the index's range back anyway).
  const Tensor host_index = empty(index.sizes(), {DType::i64, Device::cpu()});  // 0-dim or 1-D, as index
  kernels::copy(host_index, index);
  const int64_t* indices = host_index.data_ptr<int64_t>();
  std::vector<int64_t> first(layout.size + 1, 0), order(count);
  for (int64_t j = 0; j < count; ++j) ++first[indices[j] + 1];
  for (int64_t d = 0; d < layout.size; ++d) first[d + 1] += first[d];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t j = 0; j < count; ++j) order[next[indices[j]]++] = j;
  const Tensor first_on_device = to_device(first, dst.device()), order_on_device = to_device(order, dst.device());

  SG_DISPATCH_NUMERIC(dst.dtype(), "index_add", [&]<typename scalar_t>() {
    launch_index_add<scalar_t>(dst, source, first_on_device, order_on_device, layout, count);
  });
}

void one_hot(const Tensor& out, const Tensor& indices) {
  const int64_t n = indices.numel();
  if (n == 0) return;
  const DeviceGuard guard(out.device().index);
  const Tensor flat = kernels::contiguous(indices);
  kernels::dispatch_index(indices.dtype(), [&]<typename index_t>() {
    one_hot_kernel<index_t><<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(
        out.data_ptr<int64_t>(), static_cast<const index_t*>(flat.raw_data()), n, out.size(-1));
    SG_CUDA_CHECK_LAUNCH();
  });
}

void triangle(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device().index);
  const int64_t rows = x.size(-2), cols = x.size(-1);
  // Clamped so that j - i compares without overflow; beyond the matrix every value acts alike.
  diagonal = std::clamp<int64_t>(diagonal, -rows - 1, cols + 1);
  std::array<std::vector<int64_t>, 2> byte_strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    byte_strides[0].push_back(out.stride(d) * static_cast<int64_t>(out.element_size()));
    byte_strides[1].push_back(x.stride(d) * static_cast<int64_t>(x.element_size()));
  }
  const char* op_name = lower ? "tril" : "triu";
  const StridedOffsets<2> offsets = StridedOffsets<2>::make(x.sizes(), byte_strides, op_name);
  SG_DISPATCH_ALL(x.dtype(), op_name, [&]<typename scalar_t>() {
    launch_triangle<scalar_t>(out, x, offsets, rows, cols, diagonal, lower);
  });
}

}  // namespace sg::cuda
