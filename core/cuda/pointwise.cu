// CUDA pointwise kernels: copy_on_device, fill, unary, binary, clamp, where. Each is one
// gpu_map (core/cuda/elementwise.cuh) around the per-element code the CPU kernels use too:
// core/convert_math.h for dtype conversion, core/pointwise_math.h for the ops. 16-bit floats
// compute in float and round once on store, as on the CPU. The op is a runtime argument of
// the kernel (the CPU instantiates one loop per op so it vectorises; a GPU thread gains
// nothing from that, and one kernel per dtype keeps the build short).
//
// math::unary / math::binary are instantiated for uint8_t as on the CPU, where `x < 0` is
// always false and gelu's constants truncate; nvcc warns about both, g++ does not.
#pragma nv_diag_suppress 186, 173

#include <initializer_list>
#include <limits>
#include <optional>

#include "core/convert_math.h"
#include "core/cuda/elementwise.cuh"
#include "core/cuda/pointwise_kernels.h"

namespace sg::cuda {

namespace {

// Every operand must live on the output's GPU: a host pointer in a kernel is an illegal address
// that poisons the whole CUDA context.
void check_on_device_of(const Tensor& out, std::initializer_list<const Tensor*> inputs, const char* op_name) {
  SG_CHECK(out.device().is_cuda(), op_name, ": expected a CUDA output, got one on ", out.device());
  for (const Tensor* input : inputs)
    SG_CHECK(input->device() == out.device(), op_name, ": expected every tensor on ", out.device(),
             ", got one of shape ", shape_str(input->sizes()), " on ", input->device());
}

template <typename out_t, typename in_t>
struct ConvertElement {
  __device__ out_t operator()(in_t x) const { return convert<out_t, in_t>(x); }
};

template <typename scalar_t>
struct ConstantElement {
  scalar_t value;
  __device__ scalar_t operator()() const { return value; }
};

template <typename scalar_t>
struct UnaryElement {
  UnaryOp op;
  __device__ scalar_t operator()(scalar_t x) const {
    using math_t = opmath_t<scalar_t>;
    return scalar_t(math::unary<math_t>(op, math_t(x)));
  }
};

template <typename scalar_t>
struct BinaryElement {
  BinaryOp op;
  opmath_t<scalar_t> alpha;
  __device__ scalar_t operator()(scalar_t a, scalar_t b) const {
    using math_t = opmath_t<scalar_t>;
    return scalar_t(math::binary<math_t>(op, math_t(a), math_t(b), alpha));
  }
};

template <typename scalar_t>
struct CompareElement {
  BinaryOp op;
  __device__ bool operator()(scalar_t a, scalar_t b) const {
    using math_t = opmath_t<scalar_t>;
    return math::binary<math_t>(op, math_t(a), math_t(b), math_t(1)) != math_t(0);
  }
};

template <typename scalar_t>
struct ClampElement {
  opmath_t<scalar_t> lo, hi;
  __device__ scalar_t operator()(scalar_t x) const {
    const opmath_t<scalar_t> v = opmath_t<scalar_t>(x);
    if (v != v) return x;  // NaN stays NaN, as in PyTorch
    const opmath_t<scalar_t> at_least_lo = v < lo ? lo : v;
    return scalar_t(at_least_lo > hi ? hi : at_least_lo);  // max wins if lo > hi, as in PyTorch
  }
};

template <typename scalar_t>
struct WhereElement {
  __device__ scalar_t operator()(bool condition, scalar_t a, scalar_t b) const { return condition ? a : b; }
};

}  // namespace

void copy_on_device(const Tensor& dst, const Tensor& src) {
  check_on_device_of(dst, {&src}, "copy");
  DeviceGuard guard(dst.device().index);
  const auto ops = describe_operands<2>(dst.sizes(), {&dst, &src}, "copy");
  auto run = [&]<typename out_t>() {
    auto run_from = [&]<typename in_t>() { gpu_map<out_t, in_t>(ops, ConvertElement<out_t, in_t>{}); };
    SG_DISPATCH_ALL(src.dtype(), "copy", run_from);
  };
  SG_DISPATCH_ALL(dst.dtype(), "copy", run);
}

// The value is converted on the host by the copy's own rule (convert from f64), as cpu::fill
// does by copying from an f64 scalar.
void fill(const Tensor& dst, double value) {
  check_on_device_of(dst, {}, "fill");
  DeviceGuard guard(dst.device().index);
  const auto ops = describe_operands<1>(dst.sizes(), {&dst}, "fill");
  auto run = [&]<typename scalar_t>() {
    gpu_map<scalar_t>(ops, ConstantElement<scalar_t>{convert<scalar_t, double>(value)});
  };
  SG_DISPATCH_ALL(dst.dtype(), "fill", run);
}

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  check_on_device_of(out, {&in}, "unary");
  DeviceGuard guard(out.device().index);
  const auto ops = describe_operands<2>(out.sizes(), {&out, &in}, "unary");
  auto run = [&]<typename scalar_t>() { gpu_map<scalar_t, scalar_t>(ops, UnaryElement<scalar_t>{op}); };
  SG_DISPATCH_NUMERIC(in.dtype(), "unary", run);
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  check_on_device_of(out, {&a, &b}, "binary");
  DeviceGuard guard(out.device().index);
  const auto ops = describe_operands<3>(out.sizes(), {&out, &a, &b}, "binary");
  auto run = [&]<typename scalar_t>() {
    if (is_comparison(op)) gpu_map<bool, scalar_t, scalar_t>(ops, CompareElement<scalar_t>{op});
    else
      gpu_map<scalar_t, scalar_t, scalar_t>(ops, BinaryElement<scalar_t>{op, static_cast<opmath_t<scalar_t>>(alpha)});
  };
  if (is_comparison(op) && a.dtype() == DType::boolean)
    return run.template operator()<uint8_t>();  // bools compare as bytes
  SG_DISPATCH_NUMERIC(a.dtype(), "binary", run);
}

void clamp(const Tensor& out, const Tensor& in, std::optional<double> min, std::optional<double> max) {
  check_on_device_of(out, {&in}, "clamp");
  DeviceGuard guard(out.device().index);
  const auto ops = describe_operands<2>(out.sizes(), {&out, &in}, "clamp");
  auto run = [&]<typename scalar_t>() {
    using math_t = opmath_t<scalar_t>;
    const math_t lo = min ? math_t(*min) : std::numeric_limits<math_t>::lowest();
    const math_t hi = max ? math_t(*max) : std::numeric_limits<math_t>::max();
    gpu_map<scalar_t, scalar_t>(ops, ClampElement<scalar_t>{lo, hi});
  };
  SG_DISPATCH_NUMERIC(in.dtype(), "clamp", run);
}

void where(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_on_device_of(out, {&condition, &a, &b}, "where");
  DeviceGuard guard(out.device().index);
  const auto ops = describe_operands<4>(out.sizes(), {&out, &condition, &a, &b}, "where");
  auto run = [&]<typename scalar_t>() { gpu_map<scalar_t, bool, scalar_t, scalar_t>(ops, WhereElement<scalar_t>{}); };
  SG_DISPATCH_ALL(out.dtype(), "where", run);
}

}  // namespace sg::cuda
