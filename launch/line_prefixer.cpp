#include "launch/line_prefixer.h"

#include <utility>

namespace sg::dist {

LinePrefixer::LinePrefixer(std::string prefix, size_t max_line_bytes)
    : prefix_(std::move(prefix)),
      max_line_bytes_(max_line_bytes) {}

std::string LinePrefixer::feed(std::string_view chunk) {
  std::string complete;
  for (const char c : chunk) {
    // The prefix goes in front of a line's first byte, except the '\n' of a "\r\n" pair, which
    // belongs to the line the '\r' already ended (Note [Prefixing lines that end in '\r']).
    if (pending_.empty() && !(c == '\n' && after_cr_)) pending_ = prefix_;
    pending_ += c;
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      complete += pending_;
      pending_.clear();
    } else if (pending_.size() >= max_line_bytes_) {
      complete += pending_ + '\n';
      pending_.clear();
    }
  }
  return complete;
}

std::string LinePrefixer::finish() {
  std::string rest = pending_.empty() ? std::string() : pending_ + '\n';
  pending_.clear();
  after_cr_ = false;
  return rest;
}

}  // namespace sg::dist
