#include "core/kernels/pointwise.h"

// The device dispatch point for pointwise kernels. A CUDA build adds `if (is_cuda) return
// cuda::...` here; no op front changes.
namespace sg::kernels {

void copy(const Tensor& dst, const Tensor& src) {
  check_device_supported(dst.device(), "copy");
  cpu::copy(dst, src);
}
void fill(const Tensor& dst, double value) {
  check_device_supported(dst.device(), "fill");
  cpu::fill(dst, value);
}
void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  check_device_supported(out.device(), "unary");
  cpu::unary(op, out, in);
}
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  check_device_supported(out.device(), "binary");
  cpu::binary(op, out, a, b, alpha);
}
void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max) {
  check_device_supported(out.device(), "clamp");
  cpu::clamp(out, in, min, max);
}
void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_device_supported(out.device(), "where");
  cpu::where(out, condition, a, b);
}

}  // namespace sg::kernels
