#pragma once
// defines: optim::clip_grad_norm_, optim::clip_grad_value_ — gradient clipping in place, as
//          torch.nn.utils.clip_grad_norm_ / clip_grad_value_; optim::summed_norm_powers, the
//          combined norm of many gradients computed where they lie.
#include <limits>

#include "core/tensor.h"

namespace sg::optim {

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

// Treats the gradients of `params` as one vector, computes its norm of order `norm_type`
// (kInfNorm for the max-abs norm) and multiplies every gradient by
// min(1, max_norm / (total_norm + 1e-6)). Returns the total norm from before the clipping.
// Parameters without a gradient are skipped; with none, returns 0.
// A NaN or infinite total norm throws with error_if_nonfinite; otherwise, as in PyTorch, the
// multiplication still happens (NaN spreads to every gradient; an infinite norm zeroes the
// finite entries and makes the infinite ones NaN), for a GradScaler or a NaN check to notice.
double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// The sum over `grads` (non-empty) of each one's norm of order `norm_type` to that power, or for
// kInfNorm the largest of those norms (NaN if any is NaN): one f64 value on the first gradient's
// device, computed there (Note [One wait for the norm] in optim/clip_grad.cpp).
Tensor summed_norm_powers(const TensorList& grads, double norm_type);

// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const TensorList& params, double clip_value);

}  // namespace sg::optim
