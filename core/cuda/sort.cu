// The CUDA sorting kernel: one thread per element writes its sort key (core/sort_key.h) and its
// position in the row; CUB's segmented stable sort then orders each row's (key, position) pairs,
// one segment per row. A stable sort of equal keys keeps their positions in increasing order,
// which is the CPU kernel's tie-break by position: both devices give the same positions, bit for
// bit. topk sorts whole rows too and keeps the first k columns (simple, and n log n rather than n).
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>

#include "core/cuda/launch.cuh"
#include "core/cuda/sort_kernels.h"
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/sort_key.h"

namespace sg::cuda {

namespace {

template <typename scalar_t>
__global__ void keys_and_positions_kernel(const scalar_t* x, int64_t n, int64_t length, bool descending, uint64_t* keys,
                                          int64_t* positions) {
  for (int64_t e = grid_first(); e < n; e += grid_step()) {
    keys[e] = sort_key(x[e], descending);
    positions[e] = e % length;
  }
}

template <typename scalar_t>
void launch_keys_and_positions(const Tensor& x, int64_t length, bool descending, const Tensor& keys,
                               const Tensor& positions) {
  keys_and_positions_kernel<scalar_t><<<grid_for(x.numel()), kBlockThreads, 0, compute_stream()>>>(
      static_cast<const scalar_t*>(x.raw_data()), x.numel(), length, descending,
      static_cast<uint64_t*>(keys.raw_data()), positions.data_ptr<int64_t>());
  SG_CUDA_CHECK_LAUNCH();
}

// offsets[r] = r * length for r = 0 .. rows: where each row's segment begins (and the last ends).
__global__ void row_offsets_kernel(int64_t* offsets, int64_t rows, int64_t length) {
  for (int64_t r = grid_first(); r <= rows; r += grid_step()) offsets[r] = r * length;
}

// A scratch buffer of `count` 8-byte words on `device` (from the caching allocator).
Tensor scratch_words(int64_t count, Device device) { return empty({count}, {DType::i64, device}); }

}  // namespace

void sorted_positions(const Tensor& positions, const Tensor& x, bool descending) {
  if (positions.numel() == 0) return;
  const DeviceGuard guard(x.device().index);
  const Tensor rows_of_x = kernels::contiguous(x);
  const int64_t n = x.numel(), length = x.size(-1), k = positions.size(-1), rows = n / length;
  const Device device = x.device();

  const Tensor keys = scratch_words(n, device), sorted_keys = scratch_words(n, device);
  const Tensor unsorted = scratch_words(n, device);
  // The sorted positions of whole rows; for k = length they are the result itself.
  const Tensor sorted = k == length ? positions : scratch_words(n, device);
  SG_DISPATCH_ALL(x.dtype(), "sort", [&]<typename scalar_t>() {
    launch_keys_and_positions<scalar_t>(rows_of_x, length, descending, keys, unsorted);
  });
  const Tensor offsets = scratch_words(rows + 1, device);
  row_offsets_kernel<<<grid_for(rows + 1), kBlockThreads, 0, compute_stream()>>>(offsets.data_ptr<int64_t>(), rows,
                                                                                 length);
  SG_CUDA_CHECK_LAUNCH();

  // CUB's two-call protocol: the first call only sizes the temporary storage.
  auto sort = [&](void* temporary, size_t& bytes) {
    SG_CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(
        temporary, bytes, static_cast<const uint64_t*>(keys.raw_data()), static_cast<uint64_t*>(sorted_keys.raw_data()),
        unsorted.data_ptr<int64_t>(), sorted.data_ptr<int64_t>(), n, rows, offsets.data_ptr<int64_t>(),
        offsets.data_ptr<int64_t>() + 1, compute_stream()));
  };
  size_t bytes = 0;
  sort(nullptr, bytes);
  // At least one byte: a null pointer (what an empty tensor may hold) would read as another query.
  const Tensor temporary = empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, {DType::u8, device});
  sort(temporary.raw_data(), bytes);

  if (k == length) return;
  // The first k columns of the [rows, length] sorted positions, copied into [rows, k].
  const Tensor first_columns(
      std::make_shared<TensorImpl>(sorted.storage(), 0, Shape{rows, k}, Shape{length, 1}, DType::i64));
  const Tensor target(std::make_shared<TensorImpl>(positions.storage(), positions.storage_offset(), Shape{rows, k},
                                                   Shape{k, 1}, DType::i64));
  kernels::copy(target, first_columns);
}

}  // namespace sg::cuda
