#pragma once
// defines: LinePrefixer — puts "[rank N] " in front of every line of a worker's output stream
//          (sgrun's output), holding a partial line until it is complete.
//
// Note [Prefixing lines that end in '\r']
// Progress bars redraw one line by ending it with '\r' instead of '\n'. A '\r' ends a line here
// too, so each redraw arrives whole and prefixed ("[rank 0] 40%\r[rank 0] 50%\r") and still
// redraws in place on a terminal; a "\r\n" pair gets no empty prefixed line between the two.
// (syncgrad's ProgressBar prints plain lines anyway when its stream is a pipe, as under sgrun.)
#include <cstddef>
#include <string>
#include <string_view>

namespace sg::dist {

class LinePrefixer {
public:
  explicit LinePrefixer(std::string prefix, size_t max_line_bytes = 64 * 1024);

  // The complete lines of `chunk` (and of what was held before it), each with the prefix and its
  // '\n' or '\r'. The unfinished rest is held back, so lines of different workers never mix; a
  // line longer than max_line_bytes is broken with a '\n' rather than held without bound.
  std::string feed(std::string_view chunk);
  // The held partial line, prefixed and ended with '\n' (at the end of the stream); may be empty.
  std::string finish();

private:
  std::string prefix_;
  size_t max_line_bytes_;
  std::string pending_;    // the unfinished line, prefix included
  bool after_cr_ = false;  // the last byte seen was a '\r'
};

}  // namespace sg::dist
