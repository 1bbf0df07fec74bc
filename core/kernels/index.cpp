#include "core/kernels/index.h"

// The device dispatch point for indexing kernels (see core/kernels/pointwise.cpp).
namespace sg::kernels {

std::pair<int64_t, int64_t> index_range(const Tensor& index) {
  check_device_supported(index.device(), "index_range");
  return cpu::index_range(index);
}
void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  check_device_supported(out.device(), "index_select");
  cpu::index_select(out, x, dim, index);
}
void index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  check_device_supported(dst.device(), "index_add");
  cpu::index_add(dst, dim, index, src);
}
void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  check_device_supported(out.device(), "gather");
  cpu::gather(out, x, dim, index);
}
void scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  check_device_supported(dst.device(), "scatter_add");
  cpu::scatter_add(dst, dim, index, src);
}
void one_hot(const Tensor& out, const Tensor& indices) {
  check_device_supported(out.device(), "one_hot");
  cpu::one_hot(out, indices);
}
void triangle(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  check_device_supported(out.device(), lower ? "tril" : "triu");
  cpu::triangle(out, x, diagonal, lower);
}

}  // namespace sg::kernels
