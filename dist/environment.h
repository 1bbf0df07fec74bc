#pragma once
// defines: LaunchEnvironment, launch_environment — where this process sits in a distributed run,
//          read from the variables a launcher sets: torchrun / sgrun, Slurm, or Open MPI;
//          timeout_from_environment — SG_DIST_TIMEOUT; the other switches (SG_DIST_DEBUG,
//          SG_STORE_TOKEN, SG_SHM_ALLREDUCE, SG_HIERARCHICAL_ALLREDUCE, SG_MACHINE_LABEL,
//          GLOO_SOCKET_IFNAME); loopback_master_warning — a
//          MASTER_ADDR that other machines cannot reach. The one place dist/ reads the environment.
#include <charconv>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sg::dist {

// Parses the whole of `text` as a number (no space or suffix left over) or returns false: how the
// variables read here are parsed, and the Accelerator's SG_VERIFY_* (train/data_parallel_check.h).
template <typename Number>
bool parse_whole(std::string_view text, Number& value) {
  const char* end = text.data() + text.size();
  const auto parsed = std::from_chars(text.data(), end, value);
  return !text.empty() && parsed.ec == std::errc() && parsed.ptr == end;
}

struct LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source;  // which launcher's variables were read: "torchrun", "slurm", "openmpi"
};

// Reads the first complete set of variables found, in this order:
//   torchrun / sgrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   Slurm:            SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and this node's entry of
//                     SLURM_(STEP_)TASKS_PER_NODE ("3(x2),1") or SLURM_NTASKS_PER_NODE
//   Open MPI:         OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
// MASTER_ADDR / MASTER_PORT are read in every case (Slurm and MPI do not set them). Without
// MASTER_ADDR a one-machine job uses 127.0.0.1, a Slurm job on several machines the first host
// of SLURM_JOB_NODELIST, and any other job on several machines is an error; MASTER_PORT
// defaults to 29500. Returns nullopt when none of the rank variables is set; throws, naming the
// variable, when a set is incomplete or a value is malformed. `lookup` defaults to getenv
// (tests pass a map).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<LaunchEnvironment> launch_environment(const EnvLookup& lookup = {});

// A warning for rank 0 to print when MASTER_ADDR is a host name (not "localhost", not a numeric
// address) that took the store to a loopback address (`store_address`: where rank 0's own store
// connection leaves from) while the job has ranks on other machines: they cannot reach it there.
// Debian and Ubuntu map a machine's own name to 127.0.1.1 in /etc/hosts, so MASTER_ADDR=$(hostname)
// (or a Slurm node name) does this. Only a warning: several "nodes" on one machine work over
// loopback. nullopt when there is nothing to say.
std::optional<std::string> loopback_master_warning(const LaunchEnvironment& env, const std::string& store_address);

// True for a numeric IPv4 or IPv6 address ("10.0.0.1", "::1"), false for a host name.
bool is_numeric_address(const std::string& host);

// The longest SG_DIST_TIMEOUT accepts: one week. A longer wait is no longer a timeout, and the
// deadlines computed from it (now + timeout) must stay far from the clock's overflow.
constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;

// SG_DIST_TIMEOUT (seconds, fractions allowed: "0.5") as the limit for rendezvous and every
// collective; nullopt when it is not set. Throws naming the variable unless the whole value is a
// finite number in (0, kMaxTimeoutSeconds]; "inf", "nan", "1e10", "10s" are refused.
std::optional<std::chrono::milliseconds> timeout_from_environment(const EnvLookup& lookup = {});

// SG_DIST_DEBUG=1: every collective first compares a fingerprint across the ranks (docs/distributed.md).
bool debug_from_environment(const EnvLookup& lookup = {});
// SG_STORE_TOKEN: the secret every client of the job's TCP store presents; empty when unset.
std::string store_token_from_environment(const EnvLookup& lookup = {});
// SG_SHM_ALLREDUCE=0 keeps all_reduce on Gloo even when every rank is on one machine; any other
// value, or none, lets it go through shared memory.
bool shared_memory_all_reduce_from_environment(const EnvLookup& lookup = {});
// SG_HIERARCHICAL_ALLREDUCE=0 keeps all_reduce of a group that spans machines on Gloo's flat
// all-reduce; any other value, or none, lets it go in three stages (dist/hierarchical_all_reduce.h).
bool hierarchical_all_reduce_from_environment(const EnvLookup& lookup = {});
// SG_MACHINE_LABEL: ranks of one machine with different labels count as different machines, so a
// test can fake several machines on one host; empty when unset. It can split a machine, never join two.
std::string machine_label_from_environment(const EnvLookup& lookup = {});
// GLOO_SOCKET_IFNAME: the network interface Gloo listens on (PyTorch's name); nullopt when unset.
std::optional<std::string> gloo_interface_from_environment(const EnvLookup& lookup = {});

}  // namespace sg::dist
