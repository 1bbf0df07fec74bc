#pragma once
// defines: dist::BackwardTimeline, StepTimes — the ReducerObserver that DDP installs: it times
//          every synchronised backward (bench/ reports the times against the backward time) and,
//          when asked, records the first few into a Chrome trace, all ranks in one file, so the
//          overlap of the all-reduces with backward can be seen (docs/ddp.md).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/chrome_trace.h"
#include "dist/reducer.h"

namespace sg::dist {

// Timings of one synchronised backward.
struct StepTimes {
  double backward_ms = 0;    // from the gradient reaching the model's output to backward's last node
  double wait_ms = 0;        // from backward's last node to the averaged gradients in .grad
  double all_reduce_ms = 0;  // the buckets' all-reduces as they ran on the communication thread
};

class BackwardTimeline final : public ReducerObserver {
public:
  explicit BackwardTimeline(ProcessGroup& group) : group_(group) {}

  // Records the first `steps` synchronised backwards (backward, the wait at its end, each
  // bucket's all-reduce) and then writes them to `path`: a collective, so every rank must ask
  // for the same number of steps; rank 0 writes the file.
  void trace_to(const std::string& path, int steps);
  const StepTimes& last_step_times() const { return last_step_times_; }

  void backward_started() override;
  void bucket_ready(size_t bucket) override;
  void backward_finished() override;
  void gradients_averaged(const std::vector<Bucket>& buckets) override;

private:
  using Clock = ChromeTrace::Clock;
  void record_trace(const std::vector<Bucket>& buckets, Clock::time_point averaged);

  ProcessGroup& group_;
  Clock::time_point backward_started_, backward_finished_;
  std::vector<Clock::time_point> bucket_ready_at_;
  StepTimes last_step_times_;
  std::unique_ptr<ChromeTrace> trace_;  // while recording
  std::string trace_path_;
  int trace_steps_left_ = 0;
};

}  // namespace sg::dist
