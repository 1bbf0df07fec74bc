#include "dist/run_fingerprint.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dist/exchange.h"

namespace sg::dist {

namespace {

// A value as the message shows it: plain when it is one word ("0.001", "Adam", "bf16"), quoted
// with its control characters escaped otherwise (a vocabulary holds spaces and newlines). Values
// longer than kShown characters are cut there, with their length after them.
std::string shown(const std::string& value) {
  constexpr size_t kShown = 80;
  const bool one_word = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == '_';
  });
  if (one_word && value.size() <= kShown) return value;
  std::string text = "\"";
  for (size_t i = 0; i < std::min(value.size(), kShown); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == '\n') text += "\\n";
    else if (c == '\t') text += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      text += escaped;
    } else {
      if (c == '"' || c == '\\') text += '\\';
      text += static_cast<char>(c);
    }
  }
  text += "\"";
  if (value.size() > kShown) text += "... (" + std::to_string(value.size()) + " bytes)";
  return text;
}

std::optional<std::string> value_of(const RunFingerprint& fingerprint, const std::string& name) {
  for (const auto& [field, value] : fingerprint.fields())
    if (field == name) return value;
  return std::nullopt;
}

// "ranks disagree on <name>: rank 0 has X, rank 1 has Y", the ranks grouped by value in the
// order of each value's first rank; nullopt when every rank has the same value.
std::optional<std::string> disagreement(const std::string& name,
                                        const std::vector<std::optional<std::string>>& values) {
  const auto groups = ranks_by_value(values);
  if (groups.size() == 1) return std::nullopt;
  std::string line = "ranks disagree on " + name + ": ";
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& [value, ranks] = groups[g];
    if (g > 0) line += ", ";
    line += ranks_named(ranks) + (ranks.size() == 1 ? " has " : " have ");
    line += value.has_value() ? shown(*value) : "no such setting";
  }
  return line;
}

}  // namespace

std::vector<std::pair<std::optional<std::string>, std::vector<int>>> ranks_by_value(
    const std::vector<std::optional<std::string>>& per_rank) {
  std::vector<std::pair<std::optional<std::string>, std::vector<int>>> groups;
  for (size_t rank = 0; rank < per_rank.size(); ++rank) {
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == per_rank[rank]; });
    if (group == groups.end()) group = groups.insert(groups.end(), {per_rank[rank], {}});
    group->second.push_back(static_cast<int>(rank));
  }
  return groups;
}

std::string ranks_named(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t last = i;
    while (last + 1 < ranks.size() && ranks[last + 1] == ranks[last] + 1) ++last;
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
    if (last > i) {
      text += '-';
      text += std::to_string(ranks[last]);
    }
    i = last + 1;
  }
  return text;
}

void RunFingerprint::add(const std::string& name, std::string value) {
  SG_CHECK(!value_of(*this, name).has_value(), "RunFingerprint: the field '", name, "' is already there");
  fields_.emplace_back(name, std::move(value));
}

void RunFingerprint::add(const std::string& name, double value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  SG_CHECK(error == std::errc(), "RunFingerprint: cannot write the value of '", name, "'");
  add(name, std::string(text, end));
}

void RunFingerprint::add(const std::string& name, bool value) { add(name, std::string(value ? "true" : "false")); }

std::string RunFingerprint::to_text() const { return nlohmann::json(fields_).dump(); }

RunFingerprint RunFingerprint::from_text(const std::string& text) {
  RunFingerprint fingerprint;
  fingerprint.fields_ = nlohmann::json::parse(text).get<std::vector<std::pair<std::string, std::string>>>();
  return fingerprint;
}

std::vector<std::string> disagreements(const std::vector<RunFingerprint>& per_rank) {
  std::vector<std::string> names;  // every rank's fields, rank 0's first
  for (const RunFingerprint& fingerprint : per_rank)
    for (const auto& [name, value] : fingerprint.fields())
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  std::vector<std::string> differing, missing_somewhere;
  for (const std::string& name : names) {
    std::vector<std::optional<std::string>> values;
    for (const RunFingerprint& fingerprint : per_rank) values.push_back(value_of(fingerprint, name));
    const std::optional<std::string> line = disagreement(name, values);
    if (!line.has_value()) continue;
    const bool everywhere = std::all_of(values.begin(), values.end(), [](const auto& v) { return v.has_value(); });
    (everywhere ? differing : missing_somewhere).push_back(*line);
  }
  return differing.empty() ? missing_somewhere : differing;
}

void check_ranks_agree(ProcessGroup& group, const RunFingerprint& fingerprint, const std::string& where) {
  if (group.size() == 1) return;
  std::vector<RunFingerprint> per_rank;
  for (const std::string& text : all_gather_strings(group, fingerprint.to_text()))
    per_rank.push_back(RunFingerprint::from_text(text));
  const std::vector<std::string> lines = disagreements(per_rank);
  if (lines.empty()) return;
  std::ostringstream message;
  message << where << ": the ranks were started with different settings, and every rank must run the same ones:";
  for (const std::string& line : lines) message << "\n  " << line;
  throw Error(message.str());
}

}  // namespace sg::dist
