#include "core/kernels/reduce.h"

// The device dispatch point for reductions (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void sum(const Tensor& out, const Tensor& in, const Shape& dims) {
  check_device_supported(in.device(), "sum");
  cpu::sum(out, in, dims);
}

void extremum(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& in, const Shape& dims) {
  check_device_supported(in.device(), which == Extremum::max ? "max" : "min");
  cpu::extremum(which, values, indices, in, dims);
}

void var(const Tensor& out, const Tensor& in, const Shape& dims, int64_t correction) {
  check_device_supported(in.device(), "var");
  cpu::var(out, in, dims, correction);
}

void norm(const Tensor& out, const Tensor& in, const Shape& dims, double p) {
  check_device_supported(in.device(), "norm");
  cpu::norm(out, in, dims, p);
}

void logsumexp(const Tensor& out, const Tensor& in, const Shape& dims) {
  check_device_supported(in.device(), "logsumexp");
  cpu::logsumexp(out, in, dims);
}

}  // namespace sg::kernels
