#pragma once
// defines: profiler::timeline_svg / write_timeline_svg — a picture of what a profiler::Profile
//          recorded: one lane per thread, each span a bar at its time and nesting depth, coloured
//          by kind (gemm, attention, pointwise, backward node, loader wait, collective, ...).
//
// The Chrome trace (log/profiler_report.h) is for exploring a run; this is for looking at one at
// a glance, or in a document, without a trace viewer: a plain SVG that any browser shows.
#include <map>
#include <string>

#include "core/profiler.h"

namespace sg::profiler {

// The SVG text: `title` on top, a time axis in milliseconds from the Profile's start, a lane per
// thread (named as the profiler named it) whose rows are nesting depths, a legend of the kinds
// present. Spans narrower than a fifth of a pixel are left out (they could not be seen, and a
// long run has hundreds of thousands); allocations are instants and are not drawn. Each bar
// carries a tooltip with its name and duration.
// `legend` renames kinds in the legend (a picture whose spans are not ops: dist/step_report.h).
using LegendNames = std::map<Category, std::string>;
std::string timeline_svg(const ProfileResult& result, const std::string& title, const LegendNames& legend = {});
// Writes it to `path` atomically.
void write_timeline_svg(const ProfileResult& result, const std::string& path, const std::string& title,
                        const LegendNames& legend = {});

}  // namespace sg::profiler
