#include "train/nonfinite_loss.h"

#include <cmath>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"

namespace sg::dist {

namespace {

// The name of the first floating-point tensor of `model` that holds inf or NaN, if any. x * 0 is 0
// for every finite x and NaN for inf and NaN, so one sum per tensor tells, without overflowing
// the way a sum of large finite weights would.
std::optional<std::string> first_nonfinite_tensor(const nn::Module& model) {
  for (const auto& [name, tensor] : model.state_dict()) {
    if (!is_floating(tensor.dtype())) continue;
    if (!std::isfinite((tensor.to(DType::f32) * 0.0).sum().item())) return name;
  }
  return std::nullopt;
}

}  // namespace

NonfiniteLossGuard::NonfiniteLossGuard(int max_steps, std::string setting)
    : max_steps_(max_steps),
      setting_(std::move(setting)) {
  SG_CHECK(max_steps_ >= 0, setting_, " must be >= 0 (0: never stop), got ", max_steps_);
}

void NonfiniteLossGuard::observe(double loss, int64_t step) {
  if (std::isfinite(loss)) {
    streak_ = 0;
    return;
  }
  if (!first_nonfinite_) first_nonfinite_ = step;
  if (streak_++ == 0) {
    streak_start_ = step;
    streak_first_loss_ = loss;
  }
  SG_CHECK(max_steps_ == 0 || streak_ < max_steps_, "the loss went non-finite (", streak_first_loss_, ") at step ",
           streak_start_, " and stayed so for ", streak_, " consecutive steps, to step ", step,
           ", so training stopped (", setting_, " ", max_steps_,
           "; 0 never stops). Try a smaller learning rate; snapshots and checkpoints written before step ",
           streak_start_, " are kept");
}

void NonfiniteLossGuard::check_before_saving(const nn::Module& model, const std::string& destination,
                                             int64_t step) const {
  const std::optional<std::string> tensor = first_nonfinite_tensor(model);
  if (!tensor) return;
  SG_FAIL("not writing ", destination, " after step ", step, ": the model's ", *tensor, " holds inf or NaN",
          first_nonfinite_ ? detail::concat(" (the loss first went non-finite at step ", *first_nonfinite_, ")")
                           : std::string(),
          ", so training stopped; the file already there, if any, is unchanged");
}

}  // namespace sg::dist
