#include "log/step_profiler.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "log/profiler_report.h"
#include "log/timeline_svg.h"

namespace sg::profiler {

StepProfiler::StepProfiler(std::string dir, int rank, int world_size, int skip_steps, int active_steps)
    : dir_(std::move(dir)),
      rank_(rank),
      per_rank_(world_size > 1),
      skip_steps_(skip_steps),
      active_steps_(active_steps) {
  if (dir_.empty()) return;
  SG_CHECK(skip_steps >= 0 && active_steps >= 1, "StepProfiler: need skip_steps >= 0 and active_steps >= 1, got ",
           skip_steps, " and ", active_steps);
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  SG_CHECK(!error, "--profile: cannot create the directory ", dir_, ": ", error.message());
  check_writable_destination("--profile", trace_path());
  if (skip_steps_ == 0) start();
}

StepProfiler::~StepProfiler() {
  if (!profile_) return;
  try {
    finish(false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "StepProfiler: could not write the profile: %s\n", e.what());
  }
}

std::string StepProfiler::trace_path() const {
  return dir_ + (per_rank_ ? "/trace_rank" + std::to_string(rank_) + ".json" : "/trace.json");
}
std::string StepProfiler::timeline_path() const {
  return dir_ + (per_rank_ ? "/timeline_rank" + std::to_string(rank_) + ".svg" : "/timeline.svg");
}
std::string StepProfiler::table_path() const {
  return dir_ + (per_rank_ ? "/key_averages_rank" + std::to_string(rank_) + ".txt" : "/key_averages.txt");
}

void StepProfiler::step() {
  if (dir_.empty()) return;
  ++steps_done_;
  if (profile_) {
    const auto now = std::chrono::steady_clock::now();
    record_span(kStepSpan, Category::user, step_started_, now, 0);
    step_started_ = now;
  }
  if (steps_done_ == skip_steps_) start();
  else if (profile_ && steps_done_ == skip_steps_ + active_steps_) finish(true);
}

void StepProfiler::start() {
  profile_ = std::make_unique<Profile>();
  step_started_ = std::chrono::steady_clock::now();
}

void StepProfiler::finish(bool at_step) {
  profile_->stop();
  const ProfileResult& result = profile_->result();
  const int pid = per_rank_ ? rank_ : static_cast<int>(::getpid());
  write_chrome_trace(result, trace_path(), pid,
                     per_rank_ ? "rank " + std::to_string(rank_) : "process " + std::to_string(pid));
  write_timeline_svg(result, timeline_path(),
                     (per_rank_ ? "rank " + std::to_string(rank_) + ", " : std::string()) + "steps " +
                         std::to_string(skip_steps_ + 1) + "-" + std::to_string(steps_done_));
  const std::string table = key_averages(result).table();
  write_file_atomically(table_path(), [&](const ByteWriter& write) { write(table.data(), table.size()); });
  std::fprintf(stderr, "profiler: wrote %s, %s and %s (%d steps)\n", trace_path().c_str(), timeline_path().c_str(),
               table_path().c_str(), steps_done_ - skip_steps_);
  if (at_step && on_finish_) on_finish_(step_breakdowns(result));
  profile_.reset();
}

}  // namespace sg::profiler
