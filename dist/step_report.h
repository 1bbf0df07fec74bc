#pragma once
// defines: StepReport, analyse_steps, step_report_text, step_timeline, write_step_report — "where did
//          the step go", across the ranks of a DDP run: each rank's profiled steps (log/step_breakdown.h)
//          gathered on rank 0, put on one clock, and summed into compute, exposed communication,
//          data loading and optimizer, with the straggler named. The apps write it with --profile DIR
//          under sgrun (DIR/step_report.txt and DIR/step_report.svg).
//
// Note [A step report across ranks]
// Each rank's profiler times its own steps on its own steady clock. Ranks on one machine share that
// clock (CLOCK_MONOTONIC); ranks on several do not, so the ranks meet at a barrier, read their
// clocks as it releases them, and every rank's times are shifted by its difference to rank 0's.
// The barrier releases the ranks within a network round trip of each other, which bounds the
// error (microseconds on one machine, about a millisecond across machines).
// A DDP step ends with an all-reduce that no rank can finish before the slowest rank has sent its
// gradients, so every rank's step takes about as long as the slowest rank's. The time a rank spent
// on its own work — compute and waiting for its data — says who is slow: per step, the rank with
// the most of it is behind the others by the difference to the median of the others; the others
// spend that difference waiting in the all-reduce, where it shows up as exposed communication. A
// rank that is slowest by more than a millisecond and 5% of the step on average is the straggler.
// The efficiency is the part of the mean step spent computing: what data-parallel training gets
// out of the ranks at this world size; the rest is what a faster link, more overlap, a faster
// loader or a balanced load could win back.
#include <string>
#include <vector>

#include "core/profiler.h"
#include "dist/process_group.h"
#include "log/step_breakdown.h"
#include "log/step_profiler.h"

namespace sg::dist {

struct StepReport {
  int ranks = 0, steps = 0;
  double step_ms = 0, compute_ms = 0, communication_ms = 0, loader_ms = 0, optimizer_ms = 0;  // means over all
  std::vector<profiler::StepBreakdown> per_rank;  // each rank's mean step (start and end unused)
  int straggler = -1;                             // -1: none
  double straggler_delay_ms = 0;                  // how far, on average per step, it is behind the others' median
  double efficiency() const { return step_ms > 0 ? compute_ms / step_ms : 0; }
};

// `per_rank[r]` holds rank r's profiled steps, already on one clock; every rank has as many.
StepReport analyse_steps(const std::vector<std::vector<profiler::StepBreakdown>>& per_rank);
std::string step_report_text(const StepReport& report);
// A ProfileResult drawing each rank as a lane of its steps' parts, in the order a step runs them
// (data loading, compute, exposed communication, optimizer), for profiler::timeline_svg.
profiler::ProfileResult step_timeline(const std::vector<std::vector<profiler::StepBreakdown>>& per_rank);

// A collective (every rank calls it with as many steps): gathers the ranks' steps on one clock and
// has rank 0 write DIR/step_report.txt and DIR/step_report.svg and print the report.
void write_step_report(const std::vector<profiler::StepBreakdown>& mine, const std::string& dir, ProcessGroup& group);

// Under a process group of several ranks, makes `profiler` write the step report into `dir` when
// its window closes (what the apps' --profile DIR does); on one process, nothing.
void report_steps_across_ranks(profiler::StepProfiler& profiler, const std::string& dir);

}  // namespace sg::dist
