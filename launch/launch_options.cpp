#include "launch/launch_options.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace sg::dist {

namespace {
// A whole number in [1, 2^31), or nothing.
std::optional<int> positive_integer(std::string_view text) {
  int value = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), value);
  if (parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}
}  // namespace

void check_launch_options(const LaunchOptions& options) {
  SG_CHECK(options.nproc_per_node >= 1, "sgrun: --nproc-per-node must be at least 1, got ", options.nproc_per_node);
  SG_CHECK(options.nnodes >= 1, "sgrun: --nnodes must be at least 1, got ", options.nnodes);
  SG_CHECK(options.node_rank >= 0 && options.node_rank < options.nnodes, "sgrun: --node-rank ", options.node_rank,
           " is out of range for --nnodes ", options.nnodes, " (expected 0 .. ", options.nnodes - 1, ")");
  SG_CHECK(!options.standalone || options.nnodes == 1, "sgrun: --standalone runs on one node, but --nnodes is ",
           options.nnodes);
  SG_CHECK(options.standalone || (options.master_port >= 1 && options.master_port <= 65535),
           "sgrun: --master-port must be in 1 .. 65535, got ", options.master_port);
  SG_CHECK(!options.master_addr.empty(), "sgrun: --master-addr is empty");
  SG_CHECK(options.max_restarts >= 0, "sgrun: --max-restarts must be at least 0, got ", options.max_restarts);
  SG_CHECK(options.grace_seconds >= 0, "sgrun: the grace period must be at least 0 s, got ", options.grace_seconds);
  SG_CHECK(!options.command.empty() && !options.command.front().empty(), "sgrun: no program to run was given");
}

int parse_nproc_per_node(const std::string& value, int gpus, int cores) {
  if (value == "gpu" || (value == "auto" && gpus > 0)) {
    SG_CHECK(gpus > 0, "sgrun: --nproc-per-node gpu: no GPU is visible on this machine (use a number, or cpu)");
    return gpus;
  }
  if (value == "cpu" || value == "auto") return std::max(cores, 1);
  const auto count = positive_integer(value);
  SG_CHECK(count.has_value(), "sgrun: --nproc-per-node must be a positive number, gpu, cpu or auto, got '", value, "'");
  return *count;
}

int parse_nnodes(const std::string& value) {
  const size_t colon = value.find(':');
  const auto low = positive_integer(std::string_view(value).substr(0, colon));
  const auto high = colon == std::string::npos ? low : positive_integer(std::string_view(value).substr(colon + 1));
  SG_CHECK(low.has_value() && high.has_value(), "sgrun: --nnodes must be a positive number (or N:N), got '", value,
           "'");
  SG_CHECK(*low == *high, "sgrun: --nnodes ", value, " asks for an elastic job (between ", *low, " and ", *high,
           " nodes); sgrun runs a fixed number of nodes: give one number, e.g. --nnodes ", *high,
           ", and restart the job with --max-restarts when a node fails");
  return *low;
}

std::pair<std::string, int> parse_rendezvous_endpoint(const std::string& value) {
  const size_t colon = value.rfind(':');
  const bool bracketed = !value.empty() && value.front() == '[';
  const size_t host_end = bracketed ? value.find(']') : colon;
  SG_CHECK(colon != std::string::npos && host_end != std::string::npos && host_end > (bracketed ? 1u : 0u) &&
               (!bracketed || host_end + 1 == colon),
           "sgrun: --rdzv-endpoint must be host:port, got '", value, "'");
  const auto port = positive_integer(std::string_view(value).substr(colon + 1));
  SG_CHECK(port.has_value() && *port <= 65535, "sgrun: --rdzv-endpoint '", value, "' has no port in 1 .. 65535");
  return {bracketed ? value.substr(1, host_end - 1) : value.substr(0, colon), *port};
}

}  // namespace sg::dist
