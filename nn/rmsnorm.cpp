#include "nn/rmsnorm.h"

#include <limits>
#include <sstream>
#include <utility>

#include "autograd/ops_pointwise.h"
#include "autograd/ops_reduce.h"
#include "core/factory.h"

namespace sg::nn {

namespace {
// torch.finfo(dtype).eps: the gap between 1 and the next representable value.
double machine_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f64: return std::numeric_limits<double>::epsilon();
    case DType::f16: return 0x1p-10;
    case DType::bf16: return 0x1p-7;
    default: return std::numeric_limits<float>::epsilon();
  }
}
}  // namespace

RMSNorm::RMSNorm(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape)),
      eps(eps),
      elementwise_affine(elementwise_affine) {
  SG_CHECK(!this->normalized_shape.empty(), "RMSNorm: normalized_shape must have at least one dim");
  SG_CHECK(!eps || *eps >= 0, "RMSNorm: eps must be at least 0, got ", *eps);
  if (elementwise_affine) weight = register_parameter("weight", ones(this->normalized_shape));
}

Tensor RMSNorm::forward(const Tensor& input) {
  const int64_t count = static_cast<int64_t>(normalized_shape.size());
  SG_CHECK(input.dim() >= count && Shape(input.sizes().end() - count, input.sizes().end()) == normalized_shape,
           "RMSNorm: input of shape ", shape_str(input.sizes()), " does not end with normalized_shape ",
           shape_str(normalized_shape));
  Shape last_dims;
  for (int64_t d = input.dim() - count; d < input.dim(); ++d) last_dims.push_back(d);
  // Every step is an op with its own derivative, so backward needs no code here.
  const Tensor mean_square = mean(mul(input, input), last_dims, /*keepdim=*/true);
  const Tensor normalized = mul(input, rsqrt(add(mean_square, eps.value_or(machine_epsilon(input.dtype())))));
  return elementwise_affine ? mul(normalized, weight) : normalized;
}

std::string RMSNorm::extra_repr() const {
  std::ostringstream out;
  out << shape_str(normalized_shape) << ", eps=";
  if (eps) out << *eps;
  else out << "None";
  out << ", elementwise_affine=" << (elementwise_affine ? "True" : "False");
  return out.str();
}

}  // namespace sg::nn
