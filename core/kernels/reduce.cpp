#include "core/kernels/reduce.h"

// The device dispatch point for reductions (see core/kernels/pointwise.cpp).
namespace sg::kernels {

void sum(const Tensor& out, const Tensor& in, const Shape& dims) {
  check_device_supported(in.device(), "sum");
  cpu::sum(out, in, dims);
}

}  // namespace sg::kernels
