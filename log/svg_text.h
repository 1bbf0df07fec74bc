#pragma once
// defines: escape_xml, svg_number — what the SVG pictures (log/timeline_svg.h,
//          launch/data_parallel_picture.h) write text and coordinates with.
#include <string>

namespace sg {

// `text` with &, <, > and " escaped, safe inside an SVG element or attribute.
std::string escape_xml(const std::string& text);
// A coordinate or a time to a tenth: finer would only make the file longer.
std::string svg_number(double value);

}  // namespace sg
