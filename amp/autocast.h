#pragma once
// defines: amp::AutocastGuard — a region of code whose products run in f16 or bf16.
//
//   {
//     sg::amp::AutocastGuard autocast(sg::DType::bf16);
//     Tensor loss = F::cross_entropy(model(x), y);   // convs and linears in bf16, the loss in f32
//   }
//   loss.backward();                                  // f32 parameters get f32 gradients
//
// Inside the region every op follows its row of the autocast table (Note [Autocast policy] in
// autograd/autocast_policy.h; docs/amp.md shows the table and explains it). Parameters stay f32;
// each weight is cast to the low dtype once per region (Note [The autocast weight cache]). The
// region is per thread and nests: an inner guard may change the dtype or switch autocast off
// (`AutocastGuard(dtype, false)`, e.g. around a piece of code that must run in f32), and the
// state before it returns when it ends. Backward never autocasts, wherever it is called.
#include "autograd/autocast_state.h"

namespace sg::amp {

class AutocastGuard {
public:
  // `dtype` must be f16 or bf16; `enabled` false opens a region in which nothing is cast.
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
  autograd::AutocastStateScope scope_;
};

// Whether this thread is inside an enabled region, and its dtype.
bool is_autocast_enabled();
DType autocast_dtype();

}  // namespace sg::amp
