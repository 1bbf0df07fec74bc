#include "log/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sg::data {

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, std::round(seconds)));
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  else
    std::snprintf(text, sizeof text, "%02lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  return text;
}

ProgressBar::ProgressBar(int64_t total, std::string label, std::string unit, std::FILE* out)
    : total_(std::max<int64_t>(total, 1)),
      label_(std::move(label)),
      unit_(std::move(unit)),
      out_(out),
      interactive_(out != nullptr && isatty(fileno(out)) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double ProgressBar::items_per_second() const {
  const double elapsed = elapsed_seconds();
  return elapsed > 0 ? static_cast<double>(items_) / elapsed : 0.0;
}

std::string ProgressBar::line() const {
  constexpr int kWidth = 25;
  const double fraction = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed = elapsed_seconds();
  const double eta = done_ > 0 ? elapsed * static_cast<double>(total_ - done_) / static_cast<double>(done_) : 0.0;
  std::ostringstream text;
  text << label_ << " " << std::string(filled, '#') << std::string(kWidth - filled, '.') << " " << done_ << "/"
       << total_;
  char rate[64];
  std::snprintf(rate, sizeof rate, " [%s<%s, %.0f %s/s]", format_duration(elapsed).c_str(),
                format_duration(eta).c_str(), items_per_second(), unit_.c_str());
  text << rate;
  for (const auto& [name, value] : values_) {
    char shown[64];
    std::snprintf(shown, sizeof shown, " %s=%.4g", name.c_str(), value);
    text << shown;
  }
  return text.str();
}

void ProgressBar::update(int64_t steps, int64_t items, const std::vector<std::pair<std::string, double>>& values) {
  done_ += steps;
  items_ += items;
  if (!values.empty()) values_ = values;
  draw(false);
}

void ProgressBar::draw(bool force) {
  if (out_ == nullptr) return;
  if (interactive_) {
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(out_, "\r%s\033[K", line().c_str());  // \033[K clears what a longer line left
  } else {
    const int decile = static_cast<int>(10 * done_ / total_);
    if (!force && decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(out_, "%s\n", line().c_str());
  }
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (out_ == nullptr) return;
  if (interactive_) {
    draw(true);
    std::fputc('\n', out_);
  } else if (last_decile_ != 10) {
    draw(true);
  }
  std::fflush(out_);
}

}  // namespace sg::data
