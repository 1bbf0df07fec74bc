#pragma once
// defines: sg::Error, SG_CHECK, SG_FAIL — the one way syncgrad reports bad input.
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

// SG_FAIL("op: ", x, " vs ", y) throws sg::Error with the concatenated message: for a failure
// with no condition left to test (an unknown case, a caught exception given a name and a file).
#define SG_FAIL(...) throw ::sg::Error(::sg::detail::concat(__VA_ARGS__))

// SG_CHECK(cond, "op: ", x, " vs ", y) fails, as SG_FAIL, unless cond holds.
#define SG_CHECK(cond, ...)            \
  do {                                 \
    if (!(cond)) SG_FAIL(__VA_ARGS__); \
  } while (0)
