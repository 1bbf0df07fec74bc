#pragma once
// defines: MetricsLog — one CSV file per run with a fixed header; each row is one event
//          (a training step or an epoch's evaluation), empty cells where a column does not apply.
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace sg::data {

class MetricsLog {
public:
  // Creates (truncates) `path` and writes the header; an empty path makes a log that writes nothing.
  MetricsLog(const std::string& path, std::vector<std::string> columns);
  // Writes one row; keys must be among the columns (an unknown key is an sg::Error naming it). A row
  // the file does not take (a full disk) is an sg::Error naming the file and the reason.
  void write(const std::map<std::string, std::string>& row);
  bool enabled() const { return file_.is_open(); }

private:
  void flush_or_fail();

  std::string path_;
  std::vector<std::string> columns_;
  std::ofstream file_;
};

}  // namespace sg::data
