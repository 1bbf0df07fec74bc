#include "dist/environment.h"

#include <arpa/inet.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sg::dist {

namespace {

struct Names {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;  // nullptr: Slurm, see slurm_tasks_on_this_node
};

constexpr Names kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

// `lookup`, or getenv when it is empty.
EnvLookup or_getenv(const EnvLookup& lookup) {
  if (lookup) return lookup;
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
}

int parse_int(const char* name, const std::string& value) {
  int parsed = 0;
  SG_CHECK(parse_whole(value, parsed), "distributed environment: ", name, "='", value, "' is not a whole number");
  return parsed;
}

// "3(x2),1" -> {3, 3, 1}; nullopt when `list` is not such a list or names more nodes than
// `world_size` (every node runs at least one task).
std::optional<std::vector<int>> expand_task_counts(std::string_view list, int world_size) {
  std::vector<int> counts;
  for (;;) {
    const std::string_view entry = list.substr(0, list.find(','));
    const size_t repeat_at = entry.find("(x");
    int tasks = 0;
    int repeat = 1;
    if (!parse_whole(entry.substr(0, repeat_at), tasks) || tasks < 1) return std::nullopt;
    if (repeat_at != std::string_view::npos &&
        (entry.back() != ')' || !parse_whole(entry.substr(repeat_at + 2, entry.size() - repeat_at - 3), repeat) ||
         repeat < 1))
      return std::nullopt;
    if (repeat > world_size - static_cast<int>(counts.size())) return std::nullopt;
    counts.insert(counts.end(), static_cast<size_t>(repeat), tasks);
    if (entry.size() == list.size()) return counts;
    list.remove_prefix(entry.size() + 1);
  }
}

// Note [Slurm's tasks per node]
// Slurm has no "tasks on this node" variable. SLURM_STEP_TASKS_PER_NODE (the srun step) and
// SLURM_TASKS_PER_NODE (the job) list every node's count in node order, run-length encoded
// ("3(x2),1" means 3, 3, 1), and SLURM_NODEID says which entry is this node.
// SLURM_NTASKS_PER_NODE (set only by --ntasks-per-node) is one number for every node; a list of
// one entry reads the same way.
int slurm_tasks_on_this_node(const EnvLookup& lookup, int world_size) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    const auto list = lookup(name);
    if (!list) continue;
    const auto counts = expand_task_counts(*list, world_size);
    SG_CHECK(counts.has_value(), "distributed environment: ", name, "='", *list,
             "' is not a Slurm task count list such as '3(x2),1' for SLURM_NTASKS=", world_size);
    if (counts->size() == 1) return counts->front();
    const auto node_id = lookup("SLURM_NODEID");
    SG_CHECK(node_id.has_value(), "distributed environment: ", name, "='", *list,
             "' lists several nodes but SLURM_NODEID (which one is this) is not set");
    const int node = parse_int("SLURM_NODEID", *node_id);
    SG_CHECK(node >= 0 && node < static_cast<int>(counts->size()), "distributed environment: SLURM_NODEID=", node,
             " but ", name, "='", *list, "' lists ", counts->size(), " nodes");
    return (*counts)[static_cast<size_t>(node)];
  }
  return world_size;  // none of them: assume one machine
}

// "gpu[07-09,12],cpu1" -> "gpu07": the first host of a Slurm node list, where rank 0 runs.
std::string first_slurm_host(const std::string& nodelist) {
  std::string host;
  for (size_t i = 0; i < nodelist.size() && nodelist[i] != ','; ++i) {
    if (nodelist[i] != '[') {
      host += nodelist[i];
      continue;
    }
    const size_t close = nodelist.find(']', i);
    SG_CHECK(close != std::string::npos, "distributed environment: SLURM_JOB_NODELIST='", nodelist,
             "' has an unclosed '['");
    const std::string range = nodelist.substr(i + 1, close - i - 1);
    host += range.substr(0, range.find_first_of("-,"));
    i = close;
  }
  return host;
}

}  // namespace

std::optional<LaunchEnvironment> launch_environment(const EnvLookup& lookup_or_empty) {
  const EnvLookup lookup = or_getenv(lookup_or_empty);
  for (const Names& names : kLaunchers) {
    const auto rank = lookup(names.rank);
    if (!rank) continue;
    const auto world_size = lookup(names.world_size);
    SG_CHECK(world_size.has_value(), "distributed environment: ", names.rank, " is set but ", names.world_size,
             " is not (", names.source, " sets ", names.rank, ", ", names.world_size, ", ", names.local_rank, " and ",
             names.local_world_size ? names.local_world_size : "SLURM_TASKS_PER_NODE", ")");
    LaunchEnvironment env;
    env.source = names.source;
    env.rank = parse_int(names.rank, *rank);
    env.world_size = parse_int(names.world_size, *world_size);
    SG_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size, "distributed environment: ", names.rank,
             "=", env.rank, " is not in [0, ", names.world_size, "=", env.world_size, ")");
    // Without local variables, assume one machine.
    const auto local_rank = lookup(names.local_rank);
    env.local_rank = local_rank ? parse_int(names.local_rank, *local_rank) : env.rank;
    if (!names.local_world_size) {
      env.local_world_size = slurm_tasks_on_this_node(lookup, env.world_size);
    } else if (const auto local_world_size = lookup(names.local_world_size)) {
      env.local_world_size = parse_int(names.local_world_size, *local_world_size);
    } else {
      env.local_world_size = env.world_size;
    }
    SG_CHECK(env.local_rank >= 0 && env.local_rank < env.local_world_size,
             "distributed environment: ", names.local_rank, "=", env.local_rank, " is not in [0, ",
             env.local_world_size, ") (the number of processes on this machine)");

    if (const auto addr = lookup("MASTER_ADDR")) {
      env.master_addr = *addr;
    } else if (env.local_world_size < env.world_size) {
      // Several machines, and 127.0.0.1 would be a different machine for each of them.
      const auto nodelist = lookup("SLURM_JOB_NODELIST");
      SG_CHECK(env.source == "slurm" && nodelist, "distributed environment: the ", env.source,
               " job spans several "
               "machines (",
               env.local_world_size, " of its ", env.world_size,
               " processes are on this one) but "
               "MASTER_ADDR is not set; set it to the host name of the machine that runs rank 0");
      env.master_addr = first_slurm_host(*nodelist);  // Slurm places rank 0 on the first node
    }
    if (const auto port = lookup("MASTER_PORT")) env.master_port = parse_int("MASTER_PORT", *port);
    SG_CHECK(env.master_port > 0 && env.master_port < 65536, "distributed environment: MASTER_PORT=", env.master_port,
             " is not a TCP port");
    return env;
  }
  return std::nullopt;
}

bool is_numeric_address(const std::string& host) {
  unsigned char parsed[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), parsed) == 1 || ::inet_pton(AF_INET6, host.c_str(), parsed) == 1;
}

std::optional<std::string> loopback_master_warning(const LaunchEnvironment& env, const std::string& store_address) {
  const bool loopback =
      store_address.starts_with("127.") || store_address == "::1" || store_address.starts_with("::ffff:127.");
  if (!loopback || env.local_world_size >= env.world_size || env.master_addr == "localhost" ||
      is_numeric_address(env.master_addr))
    return std::nullopt;
  return detail::concat("warning: MASTER_ADDR '", env.master_addr, "' resolves to ", store_address,
                        ", a loopback address, on rank 0's machine, so the store listens there only, but ",
                        env.world_size - env.local_world_size, " of the job's ", env.world_size,
                        " ranks run on other machines, which cannot reach it (Debian and Ubuntu map a machine's own "
                        "name to 127.0.1.1 in /etc/hosts). Set MASTER_ADDR to this machine's address on the network "
                        "the machines share, or map the name to it in /etc/hosts.");
}

std::optional<std::chrono::milliseconds> timeout_from_environment(const EnvLookup& lookup) {
  const auto text = or_getenv(lookup)("SG_DIST_TIMEOUT");
  if (!text) return std::nullopt;
  double seconds = 0;
  SG_CHECK(parse_whole(*text, seconds) && std::isfinite(seconds) && seconds > 0 && seconds <= kMaxTimeoutSeconds,
           "distributed environment: SG_DIST_TIMEOUT='", *text, "' is not a number of seconds in (0, ",
           kMaxTimeoutSeconds, "] (at most one week)");
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));  // at least 1 ms
}

bool debug_from_environment(const EnvLookup& lookup) { return or_getenv(lookup)("SG_DIST_DEBUG") == "1"; }

std::string store_token_from_environment(const EnvLookup& lookup) {
  return or_getenv(lookup)("SG_STORE_TOKEN").value_or("");
}

bool shared_memory_all_reduce_from_environment(const EnvLookup& lookup) {
  return or_getenv(lookup)("SG_SHM_ALLREDUCE") != "0";
}

bool hierarchical_all_reduce_from_environment(const EnvLookup& lookup) {
  return or_getenv(lookup)("SG_HIERARCHICAL_ALLREDUCE") != "0";
}

std::string machine_label_from_environment(const EnvLookup& lookup) {
  return or_getenv(lookup)("SG_MACHINE_LABEL").value_or("");
}

std::optional<std::string> gloo_interface_from_environment(const EnvLookup& lookup) {
  return or_getenv(lookup)("GLOO_SOCKET_IFNAME");
}

}  // namespace sg::dist
