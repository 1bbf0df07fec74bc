#include "amp/autocast.h"

namespace sg::amp {

namespace {
autograd::AutocastState checked_state(DType dtype, bool enabled) {
  SG_CHECK(dtype == DType::f16 || dtype == DType::bf16,
           "AutocastGuard: the low precision dtype must be f16 or bf16, got ", dtype);
  return {.enabled = enabled, .dtype = dtype};
}
}  // namespace

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : scope_(checked_state(dtype, enabled)) {
  autograd::autocast_enter();
}

AutocastGuard::~AutocastGuard() { autograd::autocast_exit(); }

bool is_autocast_enabled() { return autograd::autocast_state().enabled; }
DType autocast_dtype() { return autograd::autocast_state().dtype; }

}  // namespace sg::amp
