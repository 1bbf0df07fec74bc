// sgrun: starts N workers of a syncgrad program on this node with torchrun's environment, e.g.
//   sgrun --nproc-per-node 2 build/apps/train_cnn --epochs 1
// The work is done by sg::dist::launch (dist/launcher.h); this file is its command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "dist/launcher.h"

int main(int argc, char** argv) {
  sg::dist::LaunchOptions options;
  CLI::App app{"Run a syncgrad program on N processes per node (like torchrun).\n"
               "Usage: sgrun [OPTIONS] PROGRAM [ARGS...]"};
  app.add_option("--nproc-per-node", options.nproc_per_node, "Worker processes on this node")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--nnodes", options.nnodes, "Nodes taking part (each runs its own sgrun)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--node-rank", options.node_rank, "This node's rank, 0 .. nnodes - 1")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  auto* master_addr = app.add_option("--master-addr", options.master_addr, "Address of the node running rank 0")
                          ->capture_default_str();
  auto* master_port = app.add_option("--master-port", options.master_port, "Port of rank 0's rendezvous store")
                          ->check(CLI::Range(1, 65535))->capture_default_str();
  app.add_flag("--standalone", options.standalone,
               "Single node on 127.0.0.1 with a free port picked for every attempt")
      ->excludes(master_addr)->excludes(master_port);
  app.add_option("--max-restarts", options.max_restarts, "Restarts of the whole group after a worker fails")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--grace-seconds", options.grace_seconds,
                 "Time workers get to exit after SIGTERM or a forwarded SIGINT before SIGKILL")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  // Everything from the first argument that is not one of ours on is the worker's command line.
  app.prefix_command();
  app.footer("Each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
             "MASTER_PORT, SG_RESTART_COUNT, SG_MAX_RESTARTS and SG_STORE_TOKEN (the store's per-job token;\n"
             "set it yourself, the same on every node, for a multi-node run); its output lines start with\n"
             "\"[rank N] \".\n"
             "Exit code: 0, the failing worker's code (128 + signal number when killed), or 128 + the\n"
             "signal that stopped sgrun. See docs/launcher.md.");
  CLI11_PARSE(app, argc, argv);

  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") options.command.erase(options.command.begin());
  if (!options.command.empty() && options.command.front().starts_with("-")) {
    std::fprintf(stderr, "sgrun: unknown option %s (run sgrun --help)\n", options.command.front().c_str());
    return 2;
  }
  try {
    return sg::dist::launch(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
