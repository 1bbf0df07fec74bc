#pragma once
// defines: optim::clip_grad_norm_, optim::clip_grad_value_ — gradient clipping in place, as
//          torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
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

// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const TensorList& params, double clip_value);

}  // namespace sg::optim
