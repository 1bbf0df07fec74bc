#include "launch/data_parallel_picture.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "log/svg_text.h"

namespace sg::dist {

namespace {

constexpr double kLabelWidth = 190, kPlotWidth = 600, kRowHeight = 18, kTop = 44;
constexpr int kLowestDecade = -9, kHighestDecade = 1;  // the axis: 1e-9 .. 1e1 of the update

// x of a ratio on the log axis; 0 and anything below the axis sit at its left end.
double x_of(double ratio) {
  const double decade = ratio > 0 ? std::log10(ratio) : kLowestDecade;
  const double clamped = std::clamp(decade, static_cast<double>(kLowestDecade), static_cast<double>(kHighestDecade));
  return kLabelWidth + kPlotWidth * (clamped - kLowestDecade) / (kHighestDecade - kLowestDecade);
}

double ratio_of(const TensorDrift& drift) {
  if (drift.largest_update > 0) return drift.largest_difference / drift.largest_update;
  return drift.largest_difference > 0 ? INFINITY : 0;
}

}  // namespace

std::string data_parallel_svg(const std::vector<TensorDrift>& drifts, int ranks, int64_t steps, double tolerance) {
  const double axis_y = kTop + kRowHeight * static_cast<double>(drifts.size()) + 6;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kLabelWidth + kPlotWidth + 30 << "\" height=\""
      << axis_y + 62 << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"22\" font-size=\"14\">"
      << escape_xml("sgrun --verify " + std::to_string(ranks) + ", " + std::to_string(steps) +
                    " steps: difference between the runs / the tensor's update")
      << "</text>\n";
  for (size_t i = 0; i < drifts.size(); ++i) {
    const TensorDrift& drift = drifts[i];
    const double y = kTop + kRowHeight * static_cast<double>(i), ratio = ratio_of(drift);
    const double width = std::max(2.0, x_of(ratio) - kLabelWidth);
    svg << "<text x=\"10\" y=\"" << svg_number(y + 11) << "\">" << escape_xml(drift.name) << "</text>"
        << "<rect x=\"" << kLabelWidth << "\" y=\"" << svg_number(y) << "\" width=\"" << svg_number(width)
        << "\" height=\"" << kRowHeight - 4 << "\" fill=\"" << (drift.differs ? "#e15759" : "#59a14f") << "\"><title>"
        << escape_xml(drift.name) << ": difference " << drift.largest_difference << ", update " << drift.largest_update
        << (drift.differs ? " (differs)" : " (ok)") << "</title></rect>\n";
  }
  for (int decade = kLowestDecade; decade <= kHighestDecade; ++decade) {
    const double x = x_of(std::pow(10.0, decade));
    svg << "<line x1=\"" << svg_number(x) << "\" y1=\"" << svg_number(axis_y) << "\" x2=\"" << svg_number(x)
        << "\" y2=\"" << svg_number(axis_y + 5) << "\" stroke=\"black\"/><text x=\"" << svg_number(x) << "\" y=\""
        << svg_number(axis_y + 18) << "\" text-anchor=\"middle\">1e" << decade << "</text>\n";
  }
  const double limit = x_of(tolerance);
  svg << "<line x1=\"" << kLabelWidth << "\" y1=\"" << svg_number(axis_y) << "\" x2=\"" << kLabelWidth + kPlotWidth
      << "\" y2=\"" << svg_number(axis_y) << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << svg_number(limit) << "\" y1=\"" << kTop - 6 << "\" x2=\"" << svg_number(limit) << "\" y2=\""
      << svg_number(axis_y) << "\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>\n"
      << "<text x=\"" << svg_number(limit + 4) << "\" y=\"" << kTop - 8 << "\">tolerance</text>\n"
      << "<text x=\"" << kLabelWidth << "\" y=\"" << svg_number(axis_y + 38)
      << "\">green: agrees (or differs by under 1e-6 of its own size); red: more than float reordering "
         "explains</text>\n"
      << "<text x=\"" << kLabelWidth << "\" y=\"" << svg_number(axis_y + 52)
      << "\">a tensor that did not differ at all sits at the left end</text>\n"
      << "</svg>\n";
  return svg.str();
}

}  // namespace sg::dist
