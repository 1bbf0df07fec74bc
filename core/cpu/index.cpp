// CPU indexing kernels. index_select and index_add (also embedding's forward and backward) move
// whole contiguous rows; gather, scatter_add and index_select of a strided tensor walk the index
// positions along one dim (Note [Indexing along a dim]).
#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "core/cpu/index_kernels.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

// Parallel grain for loops whose items are rows of `row_length` elements.
int64_t rows_grain(int64_t row_length) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(row_length, 1));
}

// The 1-D (or 0-dim) `index` seen as a tensor of `shape` that varies only along `dim`, so the
// walk below can serve index_select too.
Tensor index_along(const Tensor& index, const Shape& shape, int64_t dim) {
  Shape strides(shape.size(), 0);
  strides[dim] = index.dim() == 0 ? 0 : index.stride(0);
  return Tensor(std::make_shared<TensorImpl>(index.storage(), index.storage_offset(), shape, strides, index.dtype()));
}

// Note [Indexing along a dim]
// gather and scatter_add visit every position of the index tensor. Split a position into p, its
// coordinates off `dim`, and j, its coordinate on `dim`: the position pairs self[p, index[p, j]]
// with other[p, j], where self is what is indexed (gather's input, scatter's destination) and
// other is gather's output or scatter's source. Positions with different p never reach the same
// self element, so threads split the p's and need no locks. Each thread takes its p's in small
// blocks and walks j = 0, 1, ... across the block, so scatter_add adds duplicates into an element
// in increasing j for any thread count (bit-identical results), and neighbouring p's, usually
// neighbours in memory, are touched together.
template <typename index_t, typename Visit>
void walk_along_dim(const Tensor& self, const Tensor& index, const Tensor& other, int64_t dim, Visit visit) {
  const std::array<const Tensor*, 3> tensors{&self, &index, &other};
  Shape outer_sizes;
  std::array<Shape, 3> outer_strides;  // bytes, per dim of outer_sizes
  std::array<int64_t, 3> dim_strides{};
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d != dim) outer_sizes.push_back(index.size(d));
    for (int k = 0; k < 3; ++k) {
      const int64_t bytes = tensors[k]->stride(d) * static_cast<int64_t>(tensors[k]->element_size());
      if (d == dim) dim_strides[k] = bytes;
      else outer_strides[k].push_back(bytes);
    }
  }
  const int64_t outer = numel_of(outer_sizes), length = index.size(dim);
  const int64_t outer_dims = static_cast<int64_t>(outer_sizes.size());
  std::array<char*, 3> base;
  for (int k = 0; k < 3; ++k) base[k] = static_cast<char*>(tensors[k]->raw_data());

  parallel_for(outer, rows_grain(length), [&](int64_t begin, int64_t end) {
    constexpr int64_t kBlock = 64;
    std::array<std::array<char*, kBlock>, 3> starts;  // each tensor's element at (p, j = 0)
    for (int64_t block = begin; block < end; block += kBlock) {
      const int64_t count = std::min(kBlock, end - block);
      for (int64_t b = 0; b < count; ++b) {
        int64_t rest = block + b;
        for (int k = 0; k < 3; ++k) starts[k][b] = base[k];
        for (int64_t d = outer_dims - 1; d >= 0; --d) {
          const int64_t i = rest % outer_sizes[d];
          rest /= outer_sizes[d];
          for (int k = 0; k < 3; ++k) starts[k][b] += i * outer_strides[k][d];
        }
      }
      for (int64_t j = 0; j < length; ++j) {
        for (int64_t b = 0; b < count; ++b) {
          const int64_t i = *reinterpret_cast<const index_t*>(starts[1][b] + j * dim_strides[1]);
          visit(starts[0][b] + i * dim_strides[0], starts[2][b] + j * dim_strides[2]);
        }
      }
    }
  });
}

}  // namespace

std::pair<int64_t, int64_t> index_range(const Tensor& index) {
  const Tensor flat = kernels::contiguous(index);
  return kernels::dispatch_index(index.dtype(), [&]<typename index_t>() {
    const index_t* data = static_cast<const index_t*>(flat.raw_data());
    const auto [lowest, highest] = std::minmax_element(data, data + flat.numel());
    return std::pair<int64_t, int64_t>(*lowest, *highest);
  });
}

void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  if (!x.is_contiguous()) {
    // Read a strided x where it lies: copying it whole to pick a few rows could cost far more.
    gather(out, x, dim, index_along(index, out.sizes(), dim));
    return;
  }
  const kernels::RowLayout layout = kernels::row_layout(x.sizes(), dim);
  const int64_t count = index.numel();
  const int64_t index_stride = index.dim() == 0 ? 0 : index.stride(0);
  SG_DISPATCH_ALL(x.dtype(), "index_select", [&]<typename scalar_t>() {
    kernels::dispatch_index(index.dtype(), [&]<typename index_t>() {
      const scalar_t* source = static_cast<const scalar_t*>(x.raw_data());
      const index_t* indices = static_cast<const index_t*>(index.raw_data());
      scalar_t* target = static_cast<scalar_t*>(out.raw_data());
      const int64_t inner = layout.inner;
      // Output row (o, j) is the contiguous input row (o, index[j]).
      parallel_for(layout.outer * count, rows_grain(inner), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t o = row / count, j = row % count;
          std::copy_n(source + (o * layout.size + indices[j * index_stride]) * inner, inner, target + row * inner);
        }
      });
    });
  });
}

void index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  const Tensor source = kernels::contiguous(src);
  const kernels::RowLayout layout = kernels::row_layout(dst.sizes(), dim);
  const int64_t count = index.numel();
  const int64_t index_stride = index.dim() == 0 ? 0 : index.stride(0);
  // Group the source rows by the destination row they add into (a stable counting sort): each
  // destination row then belongs to one thread and receives its rows in increasing j.
  std::vector<int64_t> first(layout.size + 1, 0), order(count);
  kernels::dispatch_index(index.dtype(), [&]<typename index_t>() {
    const index_t* indices = static_cast<const index_t*>(index.raw_data());
    for (int64_t j = 0; j < count; ++j) ++first[indices[j * index_stride] + 1];
    for (int64_t d = 0; d < layout.size; ++d) first[d + 1] += first[d];
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t j = 0; j < count; ++j) order[next[indices[j * index_stride]]++] = j;
  });
  std::vector<int64_t> targets;  // destination rows that receive at least one source row
  for (int64_t d = 0; d < layout.size; ++d)
    if (first[d] < first[d + 1]) targets.push_back(d);
  const int64_t target_count = static_cast<int64_t>(targets.size());
  if (target_count == 0) return;

  SG_DISPATCH_NUMERIC(dst.dtype(), "index_add", [&]<typename scalar_t>() {
    using acc_t = opmath_t<scalar_t>;
    scalar_t* target = static_cast<scalar_t*>(dst.raw_data());
    const scalar_t* from = static_cast<const scalar_t*>(source.raw_data());
    const int64_t inner = layout.inner;
    const int64_t rows_per_target = std::max<int64_t>(1, count / target_count);
    parallel_for(layout.outer * target_count, rows_grain(inner * rows_per_target), [&](int64_t begin, int64_t end) {
      std::vector<acc_t> total(std::is_same_v<acc_t, scalar_t> ? 0 : inner);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / target_count, d = targets[r % target_count];
        scalar_t* row = target + (o * layout.size + d) * inner;
        if constexpr (std::is_same_v<acc_t, scalar_t>) {
          for (int64_t t = first[d]; t < first[d + 1]; ++t) {
            const scalar_t* add = from + (o * count + order[t]) * inner;
            for (int64_t k = 0; k < inner; ++k) row[k] += add[k];
          }
        } else {  // 16-bit floats: sum the row in float and round once
          for (int64_t k = 0; k < inner; ++k) total[k] = acc_t(row[k]);
          for (int64_t t = first[d]; t < first[d + 1]; ++t) {
            const scalar_t* add = from + (o * count + order[t]) * inner;
            for (int64_t k = 0; k < inner; ++k) total[k] += acc_t(add[k]);
          }
          for (int64_t k = 0; k < inner; ++k) row[k] = scalar_t(total[k]);
        }
      }
    });
  });
}

void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  SG_DISPATCH_ALL(x.dtype(), "gather", [&]<typename scalar_t>() {
    kernels::dispatch_index(index.dtype(), [&]<typename index_t>() {
      walk_along_dim<index_t>(x, index, out, dim, [](char* element, char* result) {
        *reinterpret_cast<scalar_t*>(result) = *reinterpret_cast<const scalar_t*>(element);
      });
    });
  });
}

void scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  SG_DISPATCH_NUMERIC(dst.dtype(), "scatter_add", [&]<typename scalar_t>() {
    using acc_t = opmath_t<scalar_t>;
    kernels::dispatch_index(index.dtype(), [&]<typename index_t>() {
      walk_along_dim<index_t>(dst, index, src, dim, [](char* element, char* addend) {
        scalar_t& target = *reinterpret_cast<scalar_t*>(element);
        target = scalar_t(acc_t(target) + acc_t(*reinterpret_cast<const scalar_t*>(addend)));
      });
    });
  });
}

void one_hot(const Tensor& out, const Tensor& indices) {
  const Tensor flat = kernels::contiguous(indices);
  const int64_t classes = out.size(-1);
  int64_t* target = out.data_ptr<int64_t>();
  kernels::dispatch_index(indices.dtype(), [&]<typename index_t>() {
    const index_t* data = static_cast<const index_t*>(flat.raw_data());
    parallel_for(flat.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) target[i * classes + data[i]] = 1;
    });
  });
}

void triangle(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t ndim = x.dim(), rows = x.size(-2), cols = x.size(-1);
  const Shape& sizes = x.sizes();
  const Shape& strides = x.strides();
  const int64_t matrices = numel_of(Shape(sizes.begin(), sizes.end() - 2));
  // Clamped so that i + diagonal cannot overflow; beyond the matrix every value acts alike.
  diagonal = std::clamp<int64_t>(diagonal, -rows - 1, cols + 1);
  SG_DISPATCH_ALL(x.dtype(), lower ? "tril" : "triu", [&]<typename scalar_t>() {
    const scalar_t* source = static_cast<const scalar_t*>(x.raw_data());
    scalar_t* target = static_cast<scalar_t*>(out.raw_data());
    parallel_for(matrices * rows, rows_grain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r % rows;
        int64_t offset = i * strides[ndim - 2], rest = r / rows;
        for (int64_t d = ndim - 3; d >= 0; --d) {
          offset += (rest % sizes[d]) * strides[d];
          rest /= sizes[d];
        }
        // Row i keeps columns j < split (lower: j - i <= diagonal) or j >= split (upper).
        const int64_t split = std::clamp<int64_t>(i + diagonal + (lower ? 1 : 0), 0, cols);
        const int64_t keep_begin = lower ? 0 : split, keep_end = lower ? split : cols;
        scalar_t* row = target + r * cols;
        for (int64_t j = 0; j < cols; ++j)
          row[j] = j >= keep_begin && j < keep_end ? source[offset + j * strides[ndim - 1]] : scalar_t(0);
      }
    });
  });
}

}  // namespace sg::cpu
