#pragma once
// defines: profiler::StepProfiler — profiles a few steps of a training loop and writes their
//          Chrome trace and key_averages table to a directory (the `--profile DIR` of the apps).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/profiler.h"
#include "log/step_breakdown.h"

namespace sg::profiler {

// torch.profiler's schedule(wait, warmup, active), kept simple: the first `skip_steps` steps run
// unprofiled (the first one pays for warm-up: allocator caches, BLAS start-up, lazy state), the
// next `active_steps` are recorded, then DIR/trace.json, DIR/timeline.svg and DIR/key_averages.txt
// are written — trace_rank<r>.json, timeline_rank<r>.svg and key_averages_rank<r>.txt when the run
// has several processes (DDP), whose
// traces then use the rank as their process id (else the operating system's process id), so the
// ranks' files can be opened side by side. Each profiled step is marked with a "step" span
// (log/step_breakdown.h), and `on_finish`, when set, gets the steps' breakdowns once the window
// closes (the apps hand them to dist::write_step_report, which puts the ranks side by side).
class StepProfiler {
public:
  // An empty `dir` makes a StepProfiler that does nothing. The directory is created now, so a
  // path that cannot be written fails before training starts.
  StepProfiler(std::string dir, int rank, int world_size, int skip_steps = 1, int active_steps = 5);
  // Writes what was recorded when the run ended inside the window (an error is printed, not thrown).
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Call at the end of every training step.
  void step();
  // Called with the profiled steps' breakdowns when the window closes at a step() (every rank at
  // the same step, so it may run a collective), not when the run ends inside the window.
  void on_finish(std::function<void(const std::vector<StepBreakdown>&)> callback) { on_finish_ = std::move(callback); }
  std::string trace_path() const;
  std::string timeline_path() const;
  std::string table_path() const;

private:
  void start();
  void finish(bool at_step);

  std::string dir_;
  int rank_;
  bool per_rank_;  // several processes: files and trace rows named by rank
  int skip_steps_, active_steps_;
  int steps_done_ = 0;
  std::unique_ptr<Profile> profile_;
  std::chrono::steady_clock::time_point step_started_;
  std::function<void(const std::vector<StepBreakdown>&)> on_finish_;
};

}  // namespace sg::profiler
