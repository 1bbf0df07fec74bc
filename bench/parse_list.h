#pragma once
// defines: parse_list — "1,2,4" -> {1, 2, 4}, for the benchmarks' --sizes / --threads flags.
#include <sstream>
#include <string>
#include <vector>

inline std::vector<int> parse_list(const char* text) {
  std::vector<int> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(std::stoi(item));
  return values;
}
