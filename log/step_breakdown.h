#pragma once
// defines: profiler::StepBreakdown, step_breakdowns — where each profiled training step's time went
//          on the training thread: waiting for data, waiting for communication, the optimizer, and
//          the rest (the forward and backward compute). The StepProfiler marks each step with a
//          "step" span; dist/step_report.h puts the ranks' breakdowns side by side.
#include <cstdint>
#include <vector>

#include "core/profiler.h"

namespace sg::profiler {

inline constexpr const char* kStepSpan = "step";  // the StepProfiler's span around each step

struct StepBreakdown {
  int64_t start_ns = 0, end_ns = 0;  // the step, on this process's steady clock
  int64_t loader_ns = 0;             // dataloader spans: waiting for the next batch
  int64_t communication_ns = 0;      // collective spans on the training thread: waiting for ranks
  int64_t optimizer_ns = 0;          // optimizer steps
  int64_t duration_ns() const { return end_ns - start_ns; }
  int64_t compute_ns() const { return duration_ns() - loader_ns - communication_ns - optimizer_ns; }
};

// One breakdown per "step" span of the profiling thread, in time order. Each kind's time is the
// union of its spans inside the step, so nested spans of one kind count once.
std::vector<StepBreakdown> step_breakdowns(const ProfileResult& result);

}  // namespace sg::profiler
