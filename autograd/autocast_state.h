#pragma once
// defines: AutocastState, autocast_state, set_autocast_state, AutocastStateScope, autocast_enter, autocast_exit,
//          autocast_cast, autocast_cache_size — this thread's autocast region, as the ops see it.
//
// Note [Autocast state lives in autograd]
// The user opens a region with amp::AutocastGuard (amp/autocast.h), but the decision "cast this
// operand" is taken inside the ops (matmul, conv2d, the losses, ...), which live in autograd/ and
// nn/, layers below amp/. So the region's state sits here, where every op can read it, and amp/
// only offers the guard and the documentation — as PyTorch keeps its autocast state in c10
// while torch.autocast is a Python context manager. Which op casts to what is the table in
// autograd/autocast_policy.h.
#include <cstddef>

#include "core/tensor.h"

namespace sg::autograd {

// This thread's region: off by default; `dtype` is the low precision type (f16 or bf16).
struct AutocastState {
  bool enabled = false;
  DType dtype = DType::f16;
};
AutocastState autocast_state();
void set_autocast_state(AutocastState state);

// Sets this thread's state for a scope and restores the previous one on exit (amp::AutocastGuard
// builds on it; the backward engine uses it to switch autocast off).
class AutocastStateScope {
public:
  explicit AutocastStateScope(AutocastState state) : previous_(autocast_state()) { set_autocast_state(state); }
  ~AutocastStateScope() { set_autocast_state(previous_); }
  AutocastStateScope(const AutocastStateScope&) = delete;
  AutocastStateScope& operator=(const AutocastStateScope&) = delete;

private:
  AutocastState previous_;
};

// Region nesting, counted over every guard (enabled or not). Leaving the outermost region
// (the count returns to 0) empties the weight cast cache.
void autocast_enter();
void autocast_exit();

// Note [The autocast weight cache]
// A weight is used in low precision by every forward inside a region, and converting it costs a
// pass over it each time. So while a region is open, the cast of a leaf that requires grad (a
// parameter) to the region's low dtype is made once and kept, keyed by the tensor and its
// storage version: an in-place update (an optimizer step) makes the next use cast again. The
// cached cast is an ordinary differentiable ToDtype node, so the gradient still flows back to
// the f32 parameter, in f32. Casts made with grad mode off are not cached: a later forward with
// grad mode on must not reuse a cast that carries no history. A cast whose graph was freed by a
// backward is made again.
//
// x cast to `dtype` (x itself when it already is), through the cache where the note allows.
Tensor autocast_cast(const Tensor& x, DType dtype);
// How many casts the cache holds (tests count casts with it).
size_t autocast_cache_size();

}  // namespace sg::autograd
