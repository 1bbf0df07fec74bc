#pragma once
// defines: GradMode, GradModeGuard, NoGradGuard — whether ops record history (thread-local, like
//          PyTorch).

namespace sg {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// While alive, ops record history if and only if `enabled`: PyTorch's set_grad_enabled, for code
// that decides at run time (`GradModeGuard grad_mode(training);`). Restores the previous mode.
class GradModeGuard {
public:
  explicit GradModeGuard(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

private:
  bool previous_;
};

// While alive, ops record no graph: for evaluation, optimizer updates and backward itself.
class NoGradGuard : public GradModeGuard {
public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace sg
