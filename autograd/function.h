#pragma once
// defines: record, any_requires_grad, sum_to, apply_in_place — what every differentiable
//          op front uses to attach its backward to its output.
//
// An op front looks like this (autograd/ops_pointwise.cpp):
//
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     Tensor out = <check shapes, allocate, call kernels::binary>;
//     // d(a*b)/da = b, d(a*b)/db = a
//     return record("MulBackward", out, {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b)](...) {...});
//   }
//
// The forward and the derivative sit next to each other; the engine never needs to know the op.
#include "autograd/node.h"

namespace sg::autograd {

// True when grad mode is on and some input requires grad (i.e. the op must be recorded).
bool any_requires_grad(const TensorList& inputs);

// If any input requires grad (and grad mode is on), makes `out` a non-leaf whose grad_fn runs
// `backward`; returns `out` either way. `backward` is not stored when no input needs it.
Tensor record(const char* name, Tensor out, const TensorList& inputs, BackwardFn backward);

// record() for view ops (reshape, permute, narrow, ...): also marks `out` as a view, so an
// in-place op on it is refused instead of silently corrupting the base's gradient.
Tensor record_view(const char* name, Tensor out, const Tensor& base, BackwardFn backward);

// Sums `grad` over the dims that broadcasting expanded, giving a tensor of `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// Note [In-place ops and autograd]
// `self.op_(x)` must both write into self's storage (views of self see it) and leave self with
// a history whose gradient is right. apply_in_place computes `compute(self_before)` out of
// place — where self_before is a copy of self's old value that keeps self's old history — then
// copies the result into self, bumps the storage version, and rebinds self's grad_fn. Without
// autograd (no grad needed, or NoGradGuard) it is a plain write with no copy.
// In place on a leaf that requires grad, or on a view of a tensor that requires grad, is refused.
Tensor& apply_in_place(Tensor& self, const std::function<Tensor(const Tensor&)>& compute,
                       const TensorList& other_inputs, const char* op_name);

// Note [In place without a copy]
// apply_in_place keeps a copy of self's old value, so an in-place op costs the memory of the
// out-of-place one. An op whose backward needs only its output (relu_: the gradient passes where
// the output is positive) needs no copy: write_in_place overwrites self's storage, and
// backward_of_output(out) makes the backward from `out`, an alias of the result that it may save.
// self's old history becomes the recorded op's input, and nothing is allocated. If something had
// saved self's old value for its own backward, or modifies self again before the backward, the
// version bump makes the backward fail with a clear message (SavedTensor::get), as in PyTorch.
Tensor& apply_in_place_keeping_output(Tensor& self, const std::function<void(const Tensor&)>& write_in_place,
                                      const char* backward_name,
                                      const std::function<BackwardFn(const Tensor&)>& backward_of_output,
                                      const char* op_name);

}  // namespace sg::autograd
