#include "train/nonfinite_loss.h"

#include <cmath>
#include <utility>

#include "autograd/anomaly_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "train/accelerator.h"

namespace sg::dist {

namespace {

// The name of the first tensor of `model` that holds inf or NaN, if any.
std::optional<std::string> first_nonfinite_tensor(const nn::Module& model) {
  for (const auto& [name, tensor] : model.state_dict())
    if (autograd::nonfinite_kind(tensor) != nullptr) return name;
  return std::nullopt;
}

}  // namespace

NonfiniteLossGuard::NonfiniteLossGuard(int max_steps, std::string setting, Accelerator* ranks)
    : max_steps_(max_steps),
      setting_(std::move(setting)),
      ranks_(ranks) {
  SG_CHECK(max_steps_ >= 0, setting_, " must be >= 0 (0: never stop), got ", max_steps_);
}

void NonfiniteLossGuard::add_micro_batch_loss(double loss) {
  if (!std::isfinite(loss) && !step_nonfinite_loss_) step_nonfinite_loss_ = loss;
}

std::vector<double> NonfiniteLossGuard::losses_of_all_ranks(double loss) const {
  // Without a limit nothing stops, so the ranks need not agree (and max_steps is the same
  // command-line setting on every rank).
  if (ranks_ == nullptr || ranks_->num_processes() == 1 || max_steps_ == 0) return {loss};
  const Tensor gathered = ranks_->gather(scalar_tensor(loss, {DType::f64})).contiguous();
  const double* values = gathered.data_ptr<double>();
  return std::vector<double>(values, values + gathered.numel());
}

void NonfiniteLossGuard::observe(double loss, int64_t step) {
  add_micro_batch_loss(loss);
  const std::vector<double> losses =
      losses_of_all_ranks(std::exchange(step_nonfinite_loss_, std::nullopt).value_or(loss));
  std::string nonfinite;  // "nan" on one process; "rank 1: nan, rank 3: inf" on several
  for (size_t r = 0; r < losses.size(); ++r) {
    if (std::isfinite(losses[r])) continue;
    if (!nonfinite.empty()) nonfinite += ", ";
    nonfinite += losses.size() == 1 ? detail::concat(losses[r]) : detail::concat("rank ", r, ": ", losses[r]);
  }
  if (nonfinite.empty()) {
    streak_ = 0;
    return;
  }
  if (!first_nonfinite_) first_nonfinite_ = step;
  if (streak_++ == 0) {
    streak_start_ = step;
    streak_first_losses_ = nonfinite;
  }
  SG_CHECK(max_steps_ == 0 || streak_ < max_steps_, "the loss went non-finite (", streak_first_losses_, ") at step ",
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
