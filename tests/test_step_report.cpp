// The step report across ranks (dist/step_report.h) and the per-step breakdown it is built from
// (log/step_breakdown.h): sums on made-up steps, then a 2-rank run with one rank's loader slowed.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "dist/step_report.h"
#include "dist_harness.h"
#include "helpers.h"

using namespace sg;
using profiler::StepBreakdown;

namespace {

constexpr int64_t kMs = 1000000;  // nanoseconds

profiler::Event span(const char* name, profiler::Category category, int64_t start_ms, int64_t end_ms, int thread = 0) {
  profiler::Event event;
  event.name = name;
  event.category = category;
  event.start_ns = start_ms * kMs;
  event.end_ns = end_ms * kMs;
  event.thread = thread;
  return event;
}

// A step of `length` ms starting at `start`, of which `loader` ms waiting for data and `waiting` ms
// in the all-reduce, 1 ms in the optimizer.
StepBreakdown step(int64_t start, int64_t length, int64_t loader, int64_t waiting) {
  return {start * kMs, (start + length) * kMs, loader * kMs, waiting * kMs, 1 * kMs};
}

}  // namespace

TEST_CASE("step_breakdowns sums each kind inside each step span once, on the profiling thread only") {
  profiler::ProfileResult result;
  result.profiling_thread = 0;
  result.events = {span("step", profiler::Category::user, 0, 100), span("step", profiler::Category::user, 100, 160),
                   // step 1: a loader wait with a nested one (counted once), a wait for the all-reduce
                   span("DataLoader.next", profiler::Category::dataloader, 0, 10),
                   span("DataLoader.make_batch", profiler::Category::dataloader, 2, 8),
                   span(dist::kWaitForAllReduces, profiler::Category::collective, 80, 95),
                   span("SGD.step", profiler::Category::optimizer, 95, 99),
                   // another thread's collective is not the training thread's wait
                   span("all_reduce", profiler::Category::collective, 20, 90, 1),
                   // step 2: a wait that crosses into it counts from its start
                   span("DataLoader.next", profiler::Category::dataloader, 99, 105)};
  const std::vector<StepBreakdown> steps = profiler::step_breakdowns(result);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].loader_ns == 11 * kMs);  // [0, 10) and [99, 100)
  CHECK(steps[0].communication_ns == 15 * kMs);
  CHECK(steps[0].optimizer_ns == 4 * kMs);
  CHECK(steps[0].compute_ns() == 70 * kMs);
  CHECK(steps[1].loader_ns == 5 * kMs);
  CHECK(steps[1].compute_ns() == 55 * kMs);
}

TEST_CASE("analyse_steps names the rank the others wait for, with its delay, and no straggler when balanced") {
  SUBCASE("rank 1 waits 30 ms for data every step; rank 0 waits as long in the all-reduce") {
    const dist::StepReport report = dist::analyse_steps(
        {{step(0, 100, 1, 31), step(100, 100, 1, 31)}, {step(0, 100, 31, 1), step(100, 100, 31, 1)}});
    CHECK(report.straggler == 1);
    CHECK(report.straggler_delay_ms == doctest::Approx(30));
    CHECK(report.step_ms == doctest::Approx(100));
    CHECK(report.communication_ms == doctest::Approx(16));
    CHECK(report.loader_ms == doctest::Approx(16));
    CHECK(report.compute_ms == doctest::Approx(67));
    CHECK(report.efficiency() == doctest::Approx(0.67));
    const std::string text = dist::step_report_text(report);
    CHECK(test::contains(text, "Straggler: rank 1, 30.00 ms per step behind the others"));
    CHECK(test::contains(text, "Efficiency at 2 ranks: 67%"));
  }
  SUBCASE("ranks within a millisecond of each other") {
    const dist::StepReport report =
        dist::analyse_steps({{step(0, 100, 1, 2)}, {step(0, 100, 1, 2)}, {step(0, 100, 2, 1)}});
    CHECK(report.straggler == -1);
    CHECK(test::contains(dist::step_report_text(report), "No straggler"));
  }
  SUBCASE("ranks that profiled different numbers of steps are an error") {
    CHECK_THROWS_WITH(dist::analyse_steps({{step(0, 100, 1, 2)}, {}}),
                      doctest::Contains("rank 0 profiled 1 steps, another rank 0"));
  }
}

TEST_CASE("a 2-rank run whose rank 1 loads slowly gets a report naming rank 1 as the straggler") {
  test::TempDir dir;
  const test::RankResults result = test::run_ranks(SG_STEP_REPORT_PROBE, 2, {dir.path(), "1"}, {}, 120);
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  std::ifstream file(dir.path() + "/step_report.txt");
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  CHECK(test::contains(text.str(), "Step report: 2 ranks, 5 profiled steps"));
  CHECK(test::contains(text.str(), "Straggler: rank 1,"));
  std::ifstream picture(dir.path() + "/step_report.svg");
  CHECK(picture.good());
}
