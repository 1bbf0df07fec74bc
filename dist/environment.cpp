#include "dist/environment.h"

#include <cstdlib>

#include "core/error.h"

namespace sg::dist {

namespace {

struct Names {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Names kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

int parse_int(const char* name, const std::string& value) {
  size_t used = 0;
  int parsed = 0;
  try {
    parsed = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  SG_CHECK(used == value.size() && !value.empty(), "distributed environment: ", name, "='", value,
           "' is not a whole number");
  return parsed;
}

}  // namespace

std::optional<LaunchEnvironment> launch_environment(const EnvLookup& lookup_or_empty) {
  const EnvLookup lookup = lookup_or_empty ? lookup_or_empty : [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  for (const Names& names : kLaunchers) {
    const auto rank = lookup(names.rank);
    if (!rank) continue;
    const auto world_size = lookup(names.world_size);
    SG_CHECK(world_size.has_value(), "distributed environment: ", names.rank, " is set but ", names.world_size,
             " is not (", names.source, " sets ", names.rank, ", ", names.world_size, ", ", names.local_rank, " and ",
             names.local_world_size, ")");
    LaunchEnvironment env;
    env.source = names.source;
    env.rank = parse_int(names.rank, *rank);
    env.world_size = parse_int(names.world_size, *world_size);
    SG_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size, "distributed environment: ",
             names.rank, "=", env.rank, " is not in [0, ", names.world_size, "=", env.world_size, ")");
    // Without local variables, assume one machine.
    const auto local_rank = lookup(names.local_rank);
    const auto local_world_size = lookup(names.local_world_size);
    env.local_rank = local_rank ? parse_int(names.local_rank, *local_rank) : env.rank;
    env.local_world_size =
        local_world_size ? parse_int(names.local_world_size, *local_world_size) : env.world_size;
    if (const auto addr = lookup("MASTER_ADDR")) env.master_addr = *addr;
    if (const auto port = lookup("MASTER_PORT")) env.master_port = parse_int("MASTER_PORT", *port);
    SG_CHECK(env.master_port > 0 && env.master_port < 65536, "distributed environment: MASTER_PORT=",
             env.master_port, " is not a TCP port");
    return env;
  }
  return std::nullopt;
}

}  // namespace sg::dist
