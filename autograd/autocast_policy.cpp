#include "autograd/autocast_policy.h"

#include "autograd/autocast_state.h"

namespace sg::autograd {

std::string_view cast_policy_name(CastPolicy policy) {
  switch (policy) {
    case CastPolicy::lower_precision: return "lower_precision";
    case CastPolicy::fp32: return "fp32";
    case CastPolicy::promote: return "promote";
  }
  return "?";
}

namespace {
// Only f32 and the 16-bit floats take part: f64 asks for more precision than a region gives, and
// integers are indices or labels.
bool autocast_eligible(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::f32 || t.dtype() == DType::f16 || t.dtype() == DType::bf16);
}

DType widest_eligible(const TensorList& inputs, DType fallback) {
  std::optional<DType> widest;
  for (const Tensor& t : inputs)
    if (autocast_eligible(t)) widest = widest ? promote_types(*widest, t.dtype()) : t.dtype();
  return widest.value_or(fallback);
}
}  // namespace

std::optional<TensorList> autocast_inputs(AutocastOp op, const TensorList& inputs) {
  const AutocastState state = autocast_state();
  DType target = DType::f32;
  switch (autocast_rule(op).policy) {
    case CastPolicy::lower_precision: target = state.dtype; break;
    case CastPolicy::fp32: target = DType::f32; break;
    case CastPolicy::promote: target = widest_eligible(inputs, DType::f32); break;
  }
  bool changed = false;
  TensorList cast;
  cast.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const bool casts = autocast_eligible(t) && t.dtype() != target;
    cast.push_back(casts ? autocast_cast(t, target) : t);
    changed = changed || casts;
  }
  if (!changed) return std::nullopt;
  return cast;
}

}  // namespace sg::autograd
