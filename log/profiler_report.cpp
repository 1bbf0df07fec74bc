#include "log/profiler_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

#include "core/atomic_file.h"

namespace sg::profiler {

std::vector<int64_t> self_times_ns(const std::vector<Event>& events) {
  std::vector<int64_t> self(events.size());
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Per thread, parents before their children: by start, then by depth (a child may start in the
  // same nanosecond as its parent).
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Event &x = events[a], &y = events[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.depth < y.depth;
  });
  std::vector<size_t> open;  // the chain of events enclosing the current one, outermost first
  int thread = -1;
  for (size_t i : order) {
    const Event& event = events[i];
    self[i] = event.duration_ns();
    if (event.thread != thread) {
      open.clear();
      thread = event.thread;
    }
    // The enclosing chain holds at most `depth` events; an ancestor the Profile missed (begun
    // before it started) is simply absent, so also drop any that do not contain this event.
    if (open.size() > static_cast<size_t>(event.depth)) open.resize(static_cast<size_t>(event.depth));
    while (!open.empty() && events[open.back()].end_ns < event.end_ns) open.pop_back();
    if (!open.empty()) self[open.back()] -= event.duration_ns();
    open.push_back(i);
  }
  return self;
}

KeyAverages key_averages(const ProfileResult& result) {
  KeyAverages averages;
  averages.wall_ns = result.end_ns - result.start_ns;
  const std::vector<int64_t> self = self_times_ns(result.events);
  std::unordered_map<std::string, size_t> row_of;
  for (size_t i = 0; i < result.events.size(); ++i) {
    const Event& event = result.events[i];
    auto [it, inserted] = row_of.try_emplace(event.name, averages.rows.size());
    if (inserted) averages.rows.emplace_back();
    KeyAverage& row = averages.rows[it->second];
    row.name = event.name;
    row.category = event.category;
    row.calls += 1;
    row.self_ns += self[i];
    row.total_ns += event.duration_ns();
    row.allocated_bytes += event.allocated_bytes;
    averages.self_total_ns += self[i];
    if (event.thread == result.profiling_thread) averages.profiling_thread_self_ns += self[i];
  }
  std::sort(averages.rows.begin(), averages.rows.end(), [](const KeyAverage& a, const KeyAverage& b) {
    return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.name < b.name;
  });
  return averages;
}

namespace {

// "12.345ms", "678.9us": the unit keeps four significant digits readable, as PyTorch's table.
std::string format_time(int64_t ns) {
  char text[32];
  if (ns >= 1'000'000'000) std::snprintf(text, sizeof text, "%.3fs", static_cast<double>(ns) / 1e9);
  else if (ns >= 1'000'000) std::snprintf(text, sizeof text, "%.3fms", static_cast<double>(ns) / 1e6);
  else std::snprintf(text, sizeof text, "%.3fus", static_cast<double>(ns) / 1e3);
  return text;
}

std::string format_bytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30)) std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (int64_t{1} << 20))
    std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= (int64_t{1} << 10))
    std::snprintf(text, sizeof text, "%.2f KiB", static_cast<double>(bytes) / (1 << 10));
  else std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  return text;
}

std::string percent(int64_t part, int64_t whole) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return text;
}

}  // namespace

std::string KeyAverages::table(size_t max_rows) const {
  constexpr size_t kNameWidth = 36;
  char line[256];
  std::string out;
  const auto add_row = [&](const std::string& name, const std::string& self, const std::string& share,
                           const std::string& total, const std::string& calls, const std::string& average,
                           const std::string& allocated) {
    std::snprintf(line, sizeof line, "%-*s %12s %8s %12s %7s %12s %11s\n", static_cast<int>(kNameWidth), name.c_str(),
                  self.c_str(), share.c_str(), total.c_str(), calls.c_str(), average.c_str(), allocated.c_str());
    out += line;
  };
  const std::string rule(kNameWidth + 69, '-');
  add_row("Name", "Self", "Self %", "Total", "Calls", "Total avg", "Allocated");
  out += rule + "\n";
  for (size_t r = 0; r < rows.size() && r < max_rows; ++r) {
    const KeyAverage& row = rows[r];
    const std::string name = row.name.size() <= kNameWidth ? row.name : row.name.substr(0, kNameWidth - 3) + "...";
    add_row(name, format_time(row.self_ns), percent(row.self_ns, self_total_ns), format_time(row.total_ns),
            std::to_string(row.calls), format_time(row.total_ns / std::max<int64_t>(row.calls, 1)),
            row.allocated_bytes ? format_bytes(row.allocated_bytes) : "");
  }
  out += rule + "\n";
  if (rows.size() > max_rows) {
    std::snprintf(line, sizeof line, "(%zu more rows)\n", rows.size() - max_rows);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "Self time total: %s (all threads)\n"
                "Profiled wall time: %s; the profiling thread spent %s of it inside events (%s)\n",
                format_time(self_total_ns).c_str(), format_time(wall_ns).c_str(),
                format_time(profiling_thread_self_ns).c_str(), percent(profiling_thread_self_ns, wall_ns).c_str());
  out += line;
  return out;
}

namespace {

double microseconds(int64_t ns) { return static_cast<double>(ns) / 1e3; }

nlohmann::json metadata(const char* what, int pid, int tid, const std::string& name) {
  nlohmann::json event = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) event["tid"] = tid;
  return event;
}

}  // namespace

std::string chrome_trace_json(const ProfileResult& result, int pid, const std::string& process_name) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", pid, -1, process_name));
  for (const ThreadInfo& thread : result.threads)
    events.push_back(metadata("thread_name", pid, thread.thread, thread.name));
  for (const Event& event : result.events) {
    nlohmann::json args = nlohmann::json::object();
    if (!event.input_shapes.empty()) args["input shapes"] = event.input_shapes;
    if (event.bytes != 0) args["bytes"] = event.bytes;
    if (event.allocated_bytes != 0 && event.category != Category::allocation)
      args["allocated bytes"] = event.allocated_bytes;
    nlohmann::json json_event = {{"name", event.name},  {"cat", category_name(event.category)}, {"pid", pid},
                                 {"tid", event.thread}, {"ts", microseconds(event.start_ns)},   {"args", args}};
    if (event.category == Category::allocation) {
      json_event["ph"] = "i";
      json_event["s"] = "t";  // an instant on its thread's row
    } else {
      json_event["ph"] = "X";
      json_event["dur"] = microseconds(event.duration_ns());
    }
    events.push_back(std::move(json_event));
  }
  return nlohmann::json{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}}.dump() + "\n";
}

void write_chrome_trace(const ProfileResult& result, const std::string& path, int pid,
                        const std::string& process_name) {
  const std::string json = chrome_trace_json(result, pid, process_name);
  write_file_atomically(path, [&](const ByteWriter& write) { write(json.data(), json.size()); });
}

}  // namespace sg::profiler
