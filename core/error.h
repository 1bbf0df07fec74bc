#pragma once
// defines: sg::Error, SG_CHECK — the one way syncgrad reports bad input.
#include <sstream>
#include <stdexcept>
#include <string>

namespace sg {

// Every user-facing failure is an sg::Error whose message names the op and the values
// involved (shapes, dtypes, devices, ranks, files). Never exit(), never a bare assert.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

}  // namespace sg

// SG_CHECK(cond, "op: ", x, " vs ", y) throws sg::Error with the concatenated message.
#define SG_CHECK(cond, ...)                                            \
  do {                                                                 \
    if (!(cond)) throw ::sg::Error(::sg::detail::concat(__VA_ARGS__)); \
  } while (0)
