#pragma once
// defines: LaunchOptions, check_launch_options, parse_nproc_per_node, parse_nnodes,
//          parse_rendezvous_endpoint — what `sgrun` is asked to run: torchrun's flag values read
//          into LaunchOptions, and the options checked, before any worker starts. Starting and
//          supervising the workers is launch/launcher.h's.
#include <string>
#include <utility>
#include <vector>

namespace sg::dist {

// What one node runs (sgrun's flags, docs/launcher.md).
struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool standalone = false;           // one node, MASTER_PORT a free port chosen per attempt
  int max_restarts = 0;              // restarts of the whole group after a worker failed
  double grace_seconds = 5.0;        // between SIGTERM (or a forwarded SIGINT) and SIGKILL
  std::vector<std::string> command;  // the worker program (found on PATH) and its arguments
  // The workers' SG_STORE_TOKEN (Note [The store faces the network] in dist/tcp_store.h). Empty:
  // launch() takes SG_STORE_TOKEN from its environment, or on one node draws a random one.
  std::string store_token;
  // Set in every worker's environment besides worker_environment's variables.
  std::vector<std::pair<std::string, std::string>> extra_environment = {};
};

// Throws sg::Error naming the flag when the options cannot describe a run.
void check_launch_options(const LaunchOptions& options);

// torchrun's values for its flags, as sgrun accepts them (each throws naming the flag):
// --nproc-per-node N | gpu (one per visible GPU) | cpu (one per core) | auto (gpu when there are
// GPUs, else cpu); `gpus` and `cores` are this machine's counts.
int parse_nproc_per_node(const std::string& value, int gpus, int cores);
// --nnodes N, or N:N; an elastic range (1:4) is refused, saying what is supported.
int parse_nnodes(const std::string& value);
// --rdzv-endpoint host:port (or [v6-address]:port) as (master_addr, master_port).
std::pair<std::string, int> parse_rendezvous_endpoint(const std::string& value);

}  // namespace sg::dist
