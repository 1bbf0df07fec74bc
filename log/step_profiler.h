#pragma once
// defines: profiler::StepProfiler — profiles a few steps of a training loop and writes their
//          Chrome trace and key_averages table to a directory (the `--profile DIR` of the apps).
#include <memory>
#include <string>

#include "core/profiler.h"

namespace sg::profiler {

// torch.profiler's schedule(wait, warmup, active), kept simple: the first `skip_steps` steps run
// unprofiled (the first one pays for warm-up: allocator caches, BLAS start-up, lazy state), the
// next `active_steps` are recorded, then DIR/trace.json, DIR/timeline.svg and DIR/key_averages.txt
// are written — trace_rank<r>.json, timeline_rank<r>.svg and key_averages_rank<r>.txt when the run
// has several processes (DDP), whose
// traces then use the rank as their process id (else the operating system's process id), so the
// ranks' files can be opened side by side.
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
  std::string trace_path() const;
  std::string timeline_path() const;
  std::string table_path() const;

private:
  void start();
  void finish();

  std::string dir_;
  int rank_;
  bool per_rank_;  // several processes: files and trace rows named by rank
  int skip_steps_, active_steps_;
  int steps_done_ = 0;
  std::unique_ptr<Profile> profile_;
};

}  // namespace sg::profiler
