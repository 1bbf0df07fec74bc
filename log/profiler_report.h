#pragma once
// defines: profiler::key_averages (torch.profiler's table: per name, calls, self and total time,
//          allocated bytes), profiler::chrome_trace_json / write_chrome_trace (one track per thread,
//          one process per rank) — the reports of what a profiler::Profile recorded.
#include <cstdint>
#include <string>
#include <vector>

#include "core/profiler.h"

namespace sg::profiler {

// Self time: an event's duration minus its children's, the events that ran inside it on its own
// thread (found from the nesting depth each event recorded). The sum of self times over a thread
// is the time that thread spent inside any event, with nothing counted twice.
std::vector<int64_t> self_times_ns(const std::vector<Event>& events);

struct KeyAverage {
  std::string name;
  Category category = Category::user;
  int64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;         // durations, children included (a recursion counts twice, as in PyTorch)
  int64_t allocated_bytes = 0;  // allocated while it was the innermost event
};

struct KeyAverages {
  std::vector<KeyAverage> rows;          // by self time, largest first
  int64_t self_total_ns = 0;             // every thread's self times
  int64_t wall_ns = 0;                   // the Profile's life
  int64_t profiling_thread_self_ns = 0;  // the part of self_total_ns spent on the Profile's thread

  // A text table of the first `max_rows` rows and a footer comparing the profiling thread's event
  // time with the wall time; names longer than the column are cut with "...".
  std::string table(size_t max_rows = 30) const;
};
KeyAverages key_averages(const ProfileResult& result);

// The Chrome trace-event JSON of `result` (chrome://tracing, ui.perfetto.dev): a process `pid`
// named `process_name`, one thread row per recording thread, a complete ("X") event per span with
// its input shapes and bytes, an instant ("i") event per allocation. Timestamps are steady-clock
// microseconds, like dist::ChromeTrace's, so the traces of ranks on one machine line up.
std::string chrome_trace_json(const ProfileResult& result, int pid, const std::string& process_name);
// Writes it to `path` atomically.
void write_chrome_trace(const ProfileResult& result, const std::string& path, int pid, const std::string& process_name);

}  // namespace sg::profiler
