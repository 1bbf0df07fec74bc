#pragma once
// defines: optim::LRScheduler and the schedules StepLR, CosineAnnealingLR, LambdaLR,
//          WarmupCosineLR — each sets every param group's lr from its base lr and a step count —
//          and get_schedule_factor, Hugging Face's warm-up schedules as LambdaLR factors.
//
// A scheduler counts calls to step(); whether a step is an epoch or an iteration is up to the
// caller, so the same class serves `scheduler.step()` once per epoch (PyTorch's usual use) or
// once per batch (minGPT's warm-up). As in PyTorch, constructing a scheduler applies the
// learning rate of step 0, and step() moves to the next:
//
//   optim::AdamW optimizer(model.parameters(), {.lr = 6e-4});
//   optim::WarmupCosineLR scheduler(optimizer, /*warmup_steps=*/100, /*total_steps=*/5000, 6e-5);
//   for (...) { ...; optimizer.step(); scheduler.step(); }
//
// Every schedule here is a closed form of (step, base lr) — PyTorch's `_get_closed_form_lr` —
// so resuming needs only the step count, and lrs do not drift by accumulated rounding.
// PyTorch's step() uses the equivalent recursive forms; the values agree to ~1e-15 relative.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace sg::optim {

class LRScheduler {
public:
  // The learning rate of a group whose base lr is `base_lr`, at step `epoch` (0, 1, ...).
  using Schedule = std::function<double(int64_t epoch, double base_lr)>;

  // Takes the groups' current lrs as their base lrs and applies step 0's lr. Keeps a reference
  // to `optimizer`, which must outlive the scheduler.
  LRScheduler(Optimizer& optimizer, Schedule schedule);
  virtual ~LRScheduler() = default;

  void step();  // last_epoch += 1, then set each group's lr
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The lr the schedule gives param group `group` at step `epoch`, without moving the scheduler.
  double lr_at(int64_t epoch, size_t group) const { return schedule_(epoch, base_lrs_.at(group)); }

  struct State {
    int64_t last_epoch = 0;
    std::vector<double> base_lrs;
  };
  State state_dict() const { return {last_epoch_, base_lrs_}; }
  // Restores the step count and base lrs and applies that step's lrs to the optimizer. Throws on
  // a group count that differs, a negative step count or a base lr that is negative or not finite.
  void load_state_dict(const State& state);

private:
  void apply();

  Optimizer& optimizer_;
  Schedule schedule_;
  int64_t last_epoch_ = 0;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
};

// lr = base_lr * gamma ^ floor(epoch / step_size)
class StepLR : public LRScheduler {
public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2; past T_max it rises
// again (the cosine's period is 2 * T_max), as PyTorch's does.
class CosineAnnealingLR : public LRScheduler {
public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
};

// lr = base_lr * factor(epoch). The factor may be called for any step >= 0, not only the steps
// the run reaches (the Accelerator compares schedules across ranks by their values).
class LambdaLR : public LRScheduler {
public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t epoch)> factor);
};

// nanoGPT's schedule: a linear warm-up, then a half cosine down to min_lr, then min_lr.
//   epoch < warmup_steps:         lr = base_lr * (epoch + 1) / (warmup_steps + 1)
//   epoch <= total_steps:         lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * r)) / 2,
//                                 r = (epoch - warmup_steps) / (total_steps - warmup_steps)
//   after:                        lr = min_lr
class WarmupCosineLR : public LRScheduler {
public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);
};

// The factor by which Hugging Face's get_scheduler(name, optimizer, num_warmup_steps,
// num_training_steps) scales the base lr after `step` steps: its LambdaLR lambda. With
// w = num_warmup_steps and T = num_training_steps:
//   step < w:     step / max(1, w)                                 a linear warm-up from 0, then
//   "linear":     max(0, (T - step) / max(1, T - w))               down to 0 at T and after
//   "cosine":     (1 + cos(pi * (step - w) / max(1, T - w))) / 2   half a cosine, 0 at T
//   "constant":   1                                                ("constant_with_warmup" too)
// HF's "constant" ignores the warm-up; here it warms up like the others. Any other name is an
// sg::Error naming it; dist::TrainingArguments::lr_scheduler_type takes these names.
//   optim::LambdaLR scheduler(optimizer,
//                             [](int64_t step) { return optim::get_schedule_factor("cosine", step, 100, 5000); });
double get_schedule_factor(const std::string& name, int64_t step, int64_t num_warmup_steps, int64_t num_training_steps);

}  // namespace sg::optim
