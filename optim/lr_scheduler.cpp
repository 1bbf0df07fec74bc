#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace sg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, Schedule schedule)
    : optimizer_(optimizer),
      schedule_(std::move(schedule)) {
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) base_lrs_.push_back(optimizer_.lr(g));
  apply();
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::load_state_dict(const State& state) {
  SG_CHECK(state.base_lrs.size() == optimizer_.num_param_groups(), "LRScheduler.load_state_dict: the state has ",
           state.base_lrs.size(), " base lrs, the optimizer ", optimizer_.num_param_groups(), " param groups");
  SG_CHECK(state.last_epoch >= 0, "LRScheduler.load_state_dict: invalid last_epoch ", state.last_epoch);
  for (size_t g = 0; g < state.base_lrs.size(); ++g)
    SG_CHECK(std::isfinite(state.base_lrs[g]) && state.base_lrs[g] >= 0, "LRScheduler.load_state_dict: base_lrs[", g,
             "] = ", state.base_lrs[g], " is not a learning rate (finite, >= 0)");
  last_epoch_ = state.last_epoch;
  base_lrs_ = state.base_lrs;
  apply();
}

void LRScheduler::apply() {
  last_lr_.clear();
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    last_lr_.push_back(schedule_(last_epoch_, base_lrs_[g]));
    optimizer_.set_lr(g, last_lr_.back());
  }
}

namespace {
using Schedule = LRScheduler::Schedule;

// The cosine half-wave from `high` (fraction 0) down to `low` (fraction 1).
double cosine_between(double high, double low, double fraction) {
  return low + (high - low) * (1.0 + std::cos(std::numbers::pi * fraction)) / 2.0;
}

// Each schedule checks its arguments once, before the scheduler applies step 0.
Schedule step_schedule(int64_t step_size, double gamma) {
  SG_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  return
      [=](int64_t epoch, double base_lr) { return base_lr * std::pow(gamma, static_cast<double>(epoch / step_size)); };
}

Schedule cosine_schedule(int64_t T_max, double eta_min) {
  SG_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  return [=](int64_t epoch, double base_lr) {
    return cosine_between(base_lr, eta_min, static_cast<double>(epoch) / static_cast<double>(T_max));
  };
}

Schedule lambda_schedule(std::function<double(int64_t)> factor) {
  SG_CHECK(static_cast<bool>(factor), "LambdaLR: the factor function is empty");
  return [factor = std::move(factor)](int64_t epoch, double base_lr) { return base_lr * factor(epoch); };
}

Schedule warmup_cosine_schedule(int64_t warmup_steps, int64_t total_steps, double min_lr) {
  SG_CHECK(warmup_steps >= 0 && total_steps > warmup_steps, "WarmupCosineLR: need 0 <= warmup_steps < ",
           "total_steps, got warmup_steps ", warmup_steps, " and total_steps ", total_steps);
  return [=](int64_t epoch, double base_lr) {
    if (epoch < warmup_steps) return base_lr * static_cast<double>(epoch + 1) / static_cast<double>(warmup_steps + 1);
    if (epoch > total_steps) return min_lr;
    return cosine_between(base_lr, min_lr,
                          static_cast<double>(epoch - warmup_steps) / static_cast<double>(total_steps - warmup_steps));
  };
}
}  // namespace

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, step_schedule(step_size, gamma)) {}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, cosine_schedule(T_max, eta_min)) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LRScheduler(optimizer, lambda_schedule(std::move(factor))) {}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr)
    : LRScheduler(optimizer, warmup_cosine_schedule(warmup_steps, total_steps, min_lr)) {}

double get_schedule_factor(const std::string& name, int64_t step, int64_t num_warmup_steps,
                           int64_t num_training_steps) {
  const bool constant = name == "constant" || name == "constant_with_warmup";
  SG_CHECK(constant || name == "linear" || name == "cosine", "get_schedule_factor: unknown schedule \"", name,
           "\"; expected \"linear\", \"cosine\", \"constant\" or \"constant_with_warmup\"");
  if (step < num_warmup_steps)
    return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, num_warmup_steps));
  if (constant) return 1.0;
  const auto decay_steps = static_cast<double>(std::max<int64_t>(1, num_training_steps - num_warmup_steps));
  if (name == "linear") return std::max(0.0, static_cast<double>(num_training_steps - step) / decay_steps);
  const double progress = static_cast<double>(step - num_warmup_steps) / decay_steps;
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace sg::optim
