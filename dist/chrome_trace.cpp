#include "dist/chrome_trace.h"

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "dist/exchange.h"
#include "dist/process_group.h"

namespace sg::dist {

namespace {
double microseconds(ChromeTrace::Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}
}  // namespace

void ChromeTrace::add_span(const std::string& lane, const std::string& name, Clock::time_point begin,
                           Clock::time_point end, const std::string& detail) {
  events_.push_back({lane, name, detail, begin, end});
}

std::string ChromeTrace::events_json() const {
  // Lanes become thread ids in order of first use, named by "thread_name" metadata events.
  std::vector<std::string> lanes;
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  for (const Event& e : events_) {
    size_t tid = std::find(lanes.begin(), lanes.end(), e.lane) - lanes.begin();
    if (tid == lanes.size()) {
      lanes.push_back(e.lane);
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"args", {{"name", e.lane}}}});
    }
    // Steady-clock time is shared by the processes of one machine, so ranks line up.
    nlohmann::json span = {{"name", e.name},
                           {"ph", "X"},
                           {"pid", rank_},
                           {"tid", tid},
                           {"ts", microseconds(e.begin)},
                           {"dur", microseconds(e.end) - microseconds(e.begin)}};
    if (!e.detail.empty()) span["args"] = {{"detail", e.detail}};
    events.push_back(span);
  }
  const std::string array = events.dump();
  return array.substr(1, array.size() - 2);
}

void ChromeTrace::gather_and_write(ProcessGroup& group, const std::string& path) const {
  const std::vector<std::string> per_rank = all_gather_strings(group, events_json());
  if (group.rank() != 0) return;
  std::string json = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  for (size_t r = 0; r < per_rank.size(); ++r) json += (r ? "," : "") + per_rank[r];
  json += "]}\n";
  write_file_atomically(path, [&](const ByteWriter& write) { write(json.data(), json.size()); });
}

}  // namespace sg::dist
