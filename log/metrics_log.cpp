#include "log/metrics_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace sg::data {

MetricsLog::MetricsLog(const std::string& path, std::vector<std::string> columns)
    : path_(path),
      columns_(std::move(columns)) {
  if (path.empty()) return;
  file_.open(path, std::ios::out | std::ios::trunc);
  SG_CHECK(file_.is_open(), "metrics log: cannot create '", path, "'");
  for (size_t i = 0; i < columns_.size(); ++i) file_ << (i ? "," : "") << columns_[i];
  file_ << "\n";
  flush_or_fail();
}

// A full disk or a vanished mount shows up only when the buffer reaches the file, so every row is
// flushed and checked: a run whose log stopped recording fails naming the file instead of
// finishing with rows missing.
void MetricsLog::flush_or_fail() {
  file_.flush();
  SG_CHECK(file_.good(), "metrics log: cannot write to '", path_, "': ", std::strerror(errno));
}

void MetricsLog::write(const std::map<std::string, std::string>& row) {
  if (!enabled()) return;
  for (const auto& [key, value] : row)
    SG_CHECK(std::find(columns_.begin(), columns_.end(), key) != columns_.end(), "metrics log '", path_,
             "': unknown column '", key, "'");
  for (size_t i = 0; i < columns_.size(); ++i) {
    auto it = row.find(columns_[i]);
    file_ << (i ? "," : "") << (it == row.end() ? "" : it->second);
  }
  file_ << "\n";
  flush_or_fail();  // also leaves a crashed run its rows
}

}  // namespace sg::data
