#pragma once
// defines: dist::ChromeTrace — a timeline of spans written in the Chrome trace-event JSON format
//          (open it in https://ui.perfetto.dev or chrome://tracing). DDP records backward and
//          each bucket's all-reduce in it, one process row per rank, so the overlap is visible.
#include <chrono>
#include <string>
#include <vector>

namespace sg::dist {

class ProcessGroup;

class ChromeTrace {
public:
  using Clock = std::chrono::steady_clock;

  // `rank` becomes the trace's process id ("rank 0", "rank 1", ...).
  explicit ChromeTrace(int rank) : rank_(rank) {}

  // A span on the row `lane` (e.g. "backward", "all-reduce"); `detail` shows when selected.
  void add_span(const std::string& lane, const std::string& name, Clock::time_point begin, Clock::time_point end,
                const std::string& detail = "");
  size_t size() const { return events_.size(); }

  // This rank's events as a JSON array of trace events (without the enclosing brackets).
  std::string events_json() const;
  // Gathers every rank's events to all ranks (a collective: every rank calls it) and has rank 0
  // write one file holding them all, atomically.
  void gather_and_write(ProcessGroup& group, const std::string& path) const;

private:
  struct Event {
    std::string lane, name, detail;
    Clock::time_point begin, end;
  };
  int rank_;
  std::vector<Event> events_;
};

}  // namespace sg::dist
