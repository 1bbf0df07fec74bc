#pragma once
// defines: fixed_text — a number as text with a fixed count of decimals, for progress lines.
#include <cstdio>
#include <string>

namespace sg {

// printf's %.{decimals}f: fixed_text(0.91234, 2) is "0.91"; std::to_string always gives six.
inline std::string fixed_text(double value, int decimals) {
  char text[512];  // %.6f of the largest double needs 316 characters
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace sg
