#pragma once
// defines: ProgressBar — a one-line, tqdm-style progress display with rate and ETA.
//
//   ProgressBar bar(loader.size(), "epoch 1/4", "img");
//   for (...) { ...; bar.update(1, batch_size, {{"loss", loss}}); }
//   bar.finish();
//
// On a terminal the line is redrawn in place (at most every 0.1 s); when stderr is not a
// terminal (a log file, CI) it prints a full line every 10% instead, so logs stay readable.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sg::data {

class ProgressBar {
public:
  // `total` steps; `unit` names what the rate counts (e.g. "img" for images per second). A null
  // `out` draws nothing but still measures the rate (ranks other than the main one).
  ProgressBar(int64_t total, std::string label, std::string unit = "it", std::FILE* out = stderr);
  // Advances by `steps` steps that processed `items` items (the rate's unit); `values` are shown
  // after the bar (e.g. the running loss).
  void update(int64_t steps, int64_t items, const std::vector<std::pair<std::string, double>>& values = {});
  // Draws the final state and ends the line.
  void finish();
  double elapsed_seconds() const;
  double items_per_second() const;

  // The text of the line for the current state (exposed for tests).
  std::string line() const;

private:
  void draw(bool force);

  int64_t total_;
  std::string label_;
  std::string unit_;
  std::FILE* out_;
  bool interactive_;
  int64_t done_ = 0;
  int64_t items_ = 0;
  int last_decile_ = -1;
  std::vector<std::pair<std::string, double>> values_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool finished_ = false;
};

// "1:02:03" or "02:03" for a duration in seconds.
std::string format_duration(double seconds);

}  // namespace sg::data
