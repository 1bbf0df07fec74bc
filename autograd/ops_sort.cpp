// Sorting ops. The kernel orders the last dim, so the fronts swap `dim` to the end (a view), ask
// for the first k sorted positions there and swap back. The values are then gathered: their
// backward is gather's, which scatters the gradient back to the positions the values came from.
#include "autograd/ops_sort.h"

#include <optional>

#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/sort.h"

namespace sg {

namespace {

// The positions along `dim` of the first k elements of each row of x in sort order (k: the whole
// dim when absent), as an i64 tensor of x's shape with k along `dim`.
Tensor first_sorted_positions(const Tensor& x, int64_t dim, std::optional<int64_t> k, bool descending,
                              const char* op_name) {
  if (x.dim() == 0) {  // one element: sorted as a 1-element row, the 0-dim shape given back
    const Tensor positions = first_sorted_positions(reshape(x.detach(), {1}), dim, k, descending, op_name);
    return positions.numel() == 1 ? reshape(positions, {}) : positions;
  }
  dim = wrap_dim(dim, x.dim(), op_name);
  const int64_t size = x.size(dim), count = k.value_or(size);
  SG_CHECK(count >= 0 && count <= size, op_name, ": k = ", count, " is out of range for dim ", dim, " of shape ",
           shape_str(x.sizes()), " (size ", size, ")");
  const Tensor rows = transpose(x.detach(), dim, -1);
  Shape shape = rows.sizes();
  shape.back() = count;
  const Tensor positions = empty(shape, {DType::i64, x.device()});
  kernels::sorted_positions(positions, rows, descending);
  return kernels::contiguous(transpose(positions, dim, -1));
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always*/) {
  const Tensor indices = first_sorted_positions(x, dim, std::nullopt, descending, "sort");
  // d values / d x: gather's backward, each value's gradient to the position it came from
  return {gather(x, dim, indices), indices};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always*/) {
  return first_sorted_positions(x, dim, std::nullopt, descending, "argsort");
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted: always*/) {
  const Tensor indices = first_sorted_positions(x, dim, k, /*descending=*/largest, "topk");
  // d values / d x: gather's backward, each value's gradient to the position it came from
  return {gather(x, dim, indices), indices};
}

// ---- Tensor methods (Note [Where Tensor methods are defined]) ----

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending, bool stable) const {
  return sg::sort(*this, dim, descending, stable);
}
Tensor Tensor::argsort(int64_t dim, bool descending, bool stable) const {
  return sg::argsort(*this, dim, descending, stable);
}
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return sg::topk(*this, k, dim, largest, sorted);
}

}  // namespace sg
