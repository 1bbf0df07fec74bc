#include "log/timeline_svg.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "log/svg_text.h"

namespace sg::profiler {

namespace {

// The picture's geometry, in pixels.
constexpr double kWidth = 1200, kLabelWidth = 150, kRightMargin = 20;
constexpr double kPlotWidth = kWidth - kLabelWidth - kRightMargin;
constexpr double kTop = 50, kRowHeight = 14, kLaneGap = 12;
constexpr double kMinimumBarWidth = 0.2;
constexpr int kAxisTicks = 5;

// One colour per kind of span, so that the eye groups them: matrix products blue, attention
// orange, element-wise green, backward nodes (which hold their kernels) pale, waits red.
const char* colour_of(Category category) {
  switch (category) {
    case Category::gemm: return "#4c78a8";
    case Category::conv: return "#2f5d8a";
    case Category::attention: return "#f58518";
    case Category::pointwise: return "#54a24b";
    case Category::copy: return "#9d9d9d";
    case Category::norm:
    case Category::softmax: return "#b279a2";
    case Category::random: return "#72b7b2";
    case Category::backward: return "#e4e4f0";
    case Category::dataloader: return "#e45756";
    case Category::optimizer:
    case Category::optim: return "#9d755d";
    case Category::collective: return "#ff9da6";
    case Category::user: return "#eeca3b";
    default: return "#bab0ac";
  }
}

}  // namespace

std::string timeline_svg(const ProfileResult& result, const std::string& title, const LegendNames& legend) {
  const double span_ns = std::max<double>(1.0, static_cast<double>(result.end_ns - result.start_ns));
  const auto x_of = [&](int64_t ns) {
    const double fraction = static_cast<double>(ns - result.start_ns) / span_ns;
    return kLabelWidth + std::clamp(fraction, 0.0, 1.0) * kPlotWidth;
  };
  // Each thread's lane is as many rows as its deepest nesting.
  std::map<int, int> rows_of_thread;
  for (const ThreadInfo& info : result.threads) rows_of_thread[info.thread] = 1;
  for (const Event& event : result.events)
    if (event.category != Category::allocation)
      rows_of_thread[event.thread] = std::max(rows_of_thread[event.thread], event.depth + 1);
  std::map<int, double> lane_top;
  double y = kTop;
  for (const auto& [thread, rows] : rows_of_thread) {
    lane_top[thread] = y;
    y += rows * kRowHeight + kLaneGap;
  }
  const double axis_y = y;
  const double legend_y = axis_y + 40;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << legend_y + 30
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"22\" font-size=\"14\">" << escape_xml(title) << "</text>\n";
  for (const ThreadInfo& info : result.threads)
    if (lane_top.count(info.thread))
      svg << "<text x=\"10\" y=\"" << svg_number(lane_top[info.thread] + 11) << "\">" << escape_xml(info.name)
          << "</text>\n";

  std::set<Category> drawn;
  for (const Event& event : result.events) {
    if (event.category == Category::allocation) continue;
    const double left = x_of(event.start_ns), width = x_of(event.end_ns) - left;
    if (width < kMinimumBarWidth) continue;
    drawn.insert(event.category);
    svg << "<rect x=\"" << svg_number(left) << "\" y=\""
        << svg_number(lane_top[event.thread] + event.depth * kRowHeight) << "\" width=\""
        << std::max(width, kMinimumBarWidth) << "\" height=\"" << kRowHeight - 2 << "\" fill=\""
        << colour_of(event.category) << "\"><title>" << escape_xml(event.name) << " "
        << svg_number(static_cast<double>(event.duration_ns()) / 1e6) << " ms</title></rect>\n";
  }

  // The time axis, in milliseconds from the start of the Profile.
  svg << "<line x1=\"" << kLabelWidth << "\" y1=\"" << axis_y << "\" x2=\"" << kLabelWidth + kPlotWidth << "\" y2=\""
      << axis_y << "\" stroke=\"black\"/>\n";
  for (int tick = 0; tick <= kAxisTicks; ++tick) {
    const double x = kLabelWidth + kPlotWidth * tick / kAxisTicks;
    svg << "<line x1=\"" << svg_number(x) << "\" y1=\"" << axis_y << "\" x2=\"" << svg_number(x) << "\" y2=\""
        << axis_y + 5 << "\" stroke=\"black\"/><text x=\"" << svg_number(x) << "\" y=\"" << axis_y + 18
        << "\" text-anchor=\"middle\">" << svg_number(span_ns / 1e6 * tick / kAxisTicks) << " ms</text>\n";
  }
  double legend_x = kLabelWidth;
  for (Category category : drawn) {
    const auto named = legend.find(category);
    const std::string label = named != legend.end() ? named->second : category_name(category);
    svg << "<rect x=\"" << legend_x << "\" y=\"" << legend_y << "\" width=\"12\" height=\"12\" fill=\""
        << colour_of(category) << "\" stroke=\"#666\"/><text x=\"" << legend_x + 16 << "\" y=\"" << legend_y + 10
        << "\">" << escape_xml(label) << "</text>\n";
    legend_x += std::max(90.0, 30 + 6.5 * static_cast<double>(label.size()));
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_timeline_svg(const ProfileResult& result, const std::string& path, const std::string& title,
                        const LegendNames& legend) {
  const std::string svg = timeline_svg(result, title, legend);
  write_file_atomically(path, [&](const ByteWriter& write) { write(svg.data(), svg.size()); });
}

}  // namespace sg::profiler
