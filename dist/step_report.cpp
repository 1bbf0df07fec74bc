#include "dist/step_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/factory.h"
#include "dist/dist.h"
#include "log/timeline_svg.h"

namespace sg::dist {

namespace {

constexpr double kMs = 1e-6;  // milliseconds per nanosecond
constexpr int kFields = 5;    // start, end, loader, communication, optimizer

// The time a rank spent on its own work in a step: what the others wait for.
int64_t own_work_ns(const profiler::StepBreakdown& step) { return step.compute_ns() + step.loader_ns; }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string milliseconds(double value) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << value;
  return text.str();
}

std::string percent(double part, double whole) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(0) << (whole > 0 ? 100 * part / whole : 0) << "%";
  return text.str();
}

}  // namespace

StepReport analyse_steps(const std::vector<std::vector<profiler::StepBreakdown>>& per_rank) {
  StepReport report;
  report.ranks = static_cast<int>(per_rank.size());
  SG_CHECK(report.ranks > 0, "step report: no ranks");
  report.steps = static_cast<int>(per_rank[0].size());
  for (const auto& steps : per_rank)
    SG_CHECK(static_cast<int>(steps.size()) == report.steps, "step report: rank 0 profiled ", report.steps,
             " steps, another rank ", steps.size());
  if (report.steps == 0) return report;
  std::vector<double> delay(per_rank.size(), 0);
  for (size_t r = 0; r < per_rank.size(); ++r) {
    profiler::StepBreakdown mean;
    for (const profiler::StepBreakdown& step : per_rank[r]) {
      mean.end_ns += step.duration_ns();
      mean.loader_ns += step.loader_ns;
      mean.communication_ns += step.communication_ns;
      mean.optimizer_ns += step.optimizer_ns;
    }
    for (int64_t* total : {&mean.end_ns, &mean.loader_ns, &mean.communication_ns, &mean.optimizer_ns})
      *total /= report.steps;
    report.per_rank.push_back(mean);
    report.step_ms += mean.duration_ns() * kMs / report.ranks;
    report.compute_ms += mean.compute_ns() * kMs / report.ranks;
    report.communication_ms += mean.communication_ns * kMs / report.ranks;
    report.loader_ms += mean.loader_ns * kMs / report.ranks;
    report.optimizer_ms += mean.optimizer_ns * kMs / report.ranks;
  }
  if (report.ranks < 2) return report;
  for (int s = 0; s < report.steps; ++s) {
    for (size_t r = 0; r < per_rank.size(); ++r) {
      std::vector<double> others;
      for (size_t o = 0; o < per_rank.size(); ++o)
        if (o != r) others.push_back(static_cast<double>(own_work_ns(per_rank[o][static_cast<size_t>(s)])));
      delay[r] += (own_work_ns(per_rank[r][static_cast<size_t>(s)]) - median(others)) * kMs / report.steps;
    }
  }
  const auto slowest = std::max_element(delay.begin(), delay.end());
  if (*slowest > std::max(1.0, 0.05 * report.step_ms)) {
    report.straggler = static_cast<int>(slowest - delay.begin());
    report.straggler_delay_ms = *slowest;
  }
  return report;
}

std::string step_report_text(const StepReport& report) {
  std::ostringstream text;
  text << "Step report: " << report.ranks << " ranks, " << report.steps
       << " profiled steps, on rank 0's clock (milliseconds per step, mean over the steps)\n"
       << "rank  step      compute   exposed communication  data loading  optimizer\n";
  for (size_t r = 0; r < report.per_rank.size(); ++r) {
    const profiler::StepBreakdown& mean = report.per_rank[r];
    text << std::left << std::setw(6) << r << std::setw(10) << milliseconds(mean.duration_ns() * kMs) << std::setw(10)
         << milliseconds(mean.compute_ns() * kMs) << std::setw(23) << milliseconds(mean.communication_ns * kMs)
         << std::setw(14) << milliseconds(mean.loader_ns * kMs) << milliseconds(mean.optimizer_ns * kMs) << "\n";
  }
  text << "A step takes " << milliseconds(report.step_ms) << " ms: compute " << milliseconds(report.compute_ms) << " ("
       << percent(report.compute_ms, report.step_ms) << "), exposed communication "
       << milliseconds(report.communication_ms) << " (" << percent(report.communication_ms, report.step_ms)
       << "), data loading " << milliseconds(report.loader_ms) << " (" << percent(report.loader_ms, report.step_ms)
       << "), optimizer " << milliseconds(report.optimizer_ms) << " (" << percent(report.optimizer_ms, report.step_ms)
       << ").\n";
  if (report.straggler >= 0) {
    const profiler::StepBreakdown& slow = report.per_rank[static_cast<size_t>(report.straggler)];
    text << "Straggler: rank " << report.straggler << ", " << milliseconds(report.straggler_delay_ms)
         << " ms per step behind the others (its compute " << milliseconds(slow.compute_ns() * kMs)
         << " ms, its data loading " << milliseconds(slow.loader_ns * kMs)
         << " ms); the others wait for it in the all-reduce, as exposed communication.\n";
  } else if (report.ranks > 1) {
    text << "No straggler: no rank is behind the others by more than 1 ms and 5% of the step.\n";
  }
  text << "Efficiency at " << report.ranks << " ranks: " << percent(report.compute_ms, report.step_ms)
       << " of each step computes; the rest is what overlap, a faster link or loader";
  text << (report.straggler >= 0 ? ", or a balanced load," : "") << " could win back.\n";
  return text.str();
}

profiler::ProfileResult step_timeline(const std::vector<std::vector<profiler::StepBreakdown>>& per_rank) {
  profiler::ProfileResult result;
  result.start_ns = INT64_MAX;
  result.end_ns = INT64_MIN;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const int lane = static_cast<int>(r);
    result.threads.push_back({lane, "rank " + std::to_string(r)});
    for (const profiler::StepBreakdown& step : per_rank[r]) {
      result.start_ns = std::min(result.start_ns, step.start_ns);
      result.end_ns = std::max(result.end_ns, step.end_ns);
      int64_t at = step.start_ns;
      const auto part = [&](const char* name, profiler::Category category, int64_t length) {
        if (length > 0) {
          profiler::Event event;
          event.name = name;
          event.category = category;
          event.start_ns = at;
          event.end_ns = at + length;
          event.thread = lane;
          result.events.push_back(std::move(event));
        }
        at += length;
      };
      part("data loading", profiler::Category::dataloader, step.loader_ns);
      part("compute", profiler::Category::backward, step.compute_ns());
      part("exposed communication", profiler::Category::collective, step.communication_ns);
      part("optimizer", profiler::Category::optimizer, step.optimizer_ns);
    }
  }
  return result;
}

void write_step_report(const std::vector<profiler::StepBreakdown>& mine, const std::string& dir, ProcessGroup& group) {
  group.barrier()->wait();
  const int64_t clock =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t n = static_cast<int64_t>(mine.size());
  Tensor packed = empty({1 + kFields * n}, {DType::i64});
  int64_t* data = packed.data_ptr<int64_t>();
  data[0] = clock;
  for (int64_t s = 0; s < n; ++s) {
    const profiler::StepBreakdown& step = mine[static_cast<size_t>(s)];
    const int64_t fields[kFields] = {step.start_ns, step.end_ns, step.loader_ns, step.communication_ns,
                                     step.optimizer_ns};
    std::copy(fields, fields + kFields, data + 1 + kFields * s);
  }
  std::vector<Tensor> gathered;
  for (int r = 0; r < group.size(); ++r) gathered.push_back(empty(packed.sizes(), {DType::i64}));
  group.all_gather(gathered, packed)->wait();
  if (group.rank() != 0) return;
  std::vector<std::vector<profiler::StepBreakdown>> per_rank;
  const int64_t reference = gathered[0].data_ptr<int64_t>()[0];
  for (const Tensor& rank : gathered) {
    const int64_t* values = rank.data_ptr<int64_t>();
    const int64_t offset = values[0] - reference;  // this rank's clock minus rank 0's
    std::vector<profiler::StepBreakdown> steps;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t* f = values + 1 + kFields * s;
      steps.push_back({f[0] - offset, f[1] - offset, f[2], f[3], f[4]});
    }
    per_rank.push_back(std::move(steps));
  }
  const std::string text = step_report_text(analyse_steps(per_rank));
  write_file_atomically(dir + "/step_report.txt", [&](const ByteWriter& write) { write(text.data(), text.size()); });
  profiler::write_timeline_svg(step_timeline(per_rank), dir + "/step_report.svg",
                               "Where each rank's steps went (" + std::to_string(group.size()) + " ranks)",
                               {{profiler::Category::dataloader, "data loading"},
                                {profiler::Category::backward, "compute"},
                                {profiler::Category::collective, "exposed communication"},
                                {profiler::Category::optimizer, "optimizer"}});
  std::fprintf(stderr, "%sprofiler: wrote %s/step_report.txt and %s/step_report.svg\n", text.c_str(), dir.c_str(),
               dir.c_str());
}

void report_steps_across_ranks(profiler::StepProfiler& profiler, const std::string& dir) {
  if (dir.empty() || !is_initialized() || get_world_size() < 2) return;
  profiler.on_finish(
      [dir](const std::vector<profiler::StepBreakdown>& steps) { write_step_report(steps, dir, default_group()); });
}

}  // namespace sg::dist
