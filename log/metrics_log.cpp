#include "log/metrics_log.h"

#include <algorithm>

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
  file_.flush();  // a crashed run still leaves its rows
}

}  // namespace sg::data
