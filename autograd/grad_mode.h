#pragma once
// defines: GradMode, NoGradGuard — whether ops record history (thread-local, like PyTorch).

namespace sg {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// While alive, ops record no graph: for evaluation, optimizer updates and backward itself.
class NoGradGuard {
public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
  bool previous_;
};

}  // namespace sg
