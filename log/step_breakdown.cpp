#include "log/step_breakdown.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace sg::profiler {

namespace {

using Interval = std::pair<int64_t, int64_t>;

// The length of the union of `intervals` clipped to [from, to).
int64_t covered(std::vector<Interval> intervals, int64_t from, int64_t to) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0, reached = from;
  for (auto [start, end] : intervals) {
    start = std::max(start, reached);
    end = std::min(end, to);
    if (end > start) {
      total += end - start;
      reached = end;
    }
  }
  return total;
}

}  // namespace

std::vector<StepBreakdown> step_breakdowns(const ProfileResult& result) {
  std::vector<Interval> steps, loader, communication, optimizer;
  for (const Event& event : result.events) {
    if (event.thread != result.profiling_thread) continue;
    const Interval span{event.start_ns, event.end_ns};
    if (event.category == Category::user && event.name == kStepSpan) steps.push_back(span);
    else if (event.category == Category::dataloader) loader.push_back(span);
    else if (event.category == Category::collective) communication.push_back(span);
    else if (event.category == Category::optimizer) optimizer.push_back(span);
  }
  std::sort(steps.begin(), steps.end());
  std::vector<StepBreakdown> breakdowns;
  for (const auto& [start, end] : steps)
    breakdowns.push_back(
        {start, end, covered(loader, start, end), covered(communication, start, end), covered(optimizer, start, end)});
  return breakdowns;
}

}  // namespace sg::profiler
