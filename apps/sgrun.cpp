// sgrun: starts N workers of a syncgrad program on this node with torchrun's environment, e.g.
//   sgrun --nproc-per-node 2 build/apps/train_cnn --epochs 1
// This file is its command line: torchrun's flag values are read by launch/launch_options.h, and
// the workers started and supervised by sg::dist::launch (launch/launcher.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <tuple>

#include "core/cuda_runtime/runtime.h"
#include "launch/data_parallel_verification.h"
#include "launch/launch_options.h"
#include "launch/launcher.h"

int main(int argc, char** argv) {
  sg::dist::LaunchOptions options;
  std::string nproc_per_node = "1", nnodes = "1", rendezvous_endpoint;
  int verify_ranks = 0;
  int64_t verify_steps = 5;
  std::string verify_svg;
  CLI::App app{
      "Run a syncgrad program on N processes per node (like torchrun).\n"
      "Usage: sgrun [OPTIONS] PROGRAM [ARGS...]"};
  // Every flag also answers to torchrun's spelling (--nproc_per_node, ...), so its command lines run as written.
  app.add_option("--nproc-per-node,--nproc_per_node", nproc_per_node,
                 "Worker processes on this node: N, gpu (one per GPU), cpu (one per core) or auto")
      ->capture_default_str();
  app.add_option("--nnodes", nnodes, "Nodes taking part (each runs its own sgrun); N or N:N")->capture_default_str();
  app.add_option("--node-rank,--node_rank", options.node_rank, "This node's rank, 0 .. nnodes - 1")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* master_addr =
      app.add_option("--master-addr,--master_addr", options.master_addr, "Address of the node running rank 0")
          ->capture_default_str();
  auto* master_port =
      app.add_option("--master-port,--master_port", options.master_port, "Port of rank 0's rendezvous store")
          ->check(CLI::Range(1, 65535))
          ->capture_default_str();
  auto* endpoint = app.add_option("--rdzv-endpoint,--rdzv_endpoint", rendezvous_endpoint,
                                  "host:port of rank 0's rendezvous store (instead of --master-addr/--master-port)")
                       ->excludes(master_addr)
                       ->excludes(master_port);
  app.add_flag("--standalone", options.standalone, "Single node on 127.0.0.1 with a free port picked for every attempt")
      ->excludes(master_addr)
      ->excludes(master_port)
      ->excludes(endpoint);
  app.add_option("--max-restarts,--max_restarts", options.max_restarts,
                 "Restarts of the whole group after a worker fails")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--grace-seconds,--grace_seconds", options.grace_seconds,
                 "Time workers get to exit after SIGTERM or a forwarded signal before SIGKILL")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--verify", verify_ranks,
                 "Instead of training: run the program for --verify-steps steps on N ranks and on 1 rank with N "
                 "times the batch, and report per tensor whether they agree (docs/debugging.md)")
      ->check(CLI::Range(2, 1024));
  app.add_option("--verify-steps", verify_steps, "Optimizer steps of each --verify run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--verify-svg", verify_svg, "With --verify: also draw the report as an SVG picture at this path");
  // Everything from the first argument that is not one of ours on is the worker's command line.
  app.prefix_command();
  app.footer(
      "Each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
      "MASTER_PORT, SG_RESTART_COUNT and SG_MAX_RESTARTS (also as TORCHELASTIC_RESTART_COUNT and\n"
      "TORCHELASTIC_MAX_RESTARTS) and SG_STORE_TOKEN (the store's per-job token; set it yourself,\n"
      "the same on every node, for a multi-node run), and OMP_NUM_THREADS=1 when there are several\n"
      "workers and it is not set; its output lines start with \"[rank N] \".\n"
      "Exit code: 0, the failing worker's code (128 + signal number when killed), or 128 + the\n"
      "signal that stopped sgrun. See docs/launcher.md.");
  CLI11_PARSE(app, argc, argv);

  try {
    options.nproc_per_node = sg::dist::parse_nproc_per_node(nproc_per_node, sg::cuda::device_count(),
                                                            static_cast<int>(std::thread::hardware_concurrency()));
    options.nnodes = sg::dist::parse_nnodes(nnodes);
    if (!rendezvous_endpoint.empty())
      std::tie(options.master_addr, options.master_port) = sg::dist::parse_rendezvous_endpoint(rendezvous_endpoint);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") options.command.erase(options.command.begin());
  if (!options.command.empty() && options.command.front().starts_with("-")) {
    std::fprintf(stderr, "sgrun: unknown option %s (run sgrun --help)\n", options.command.front().c_str());
    return 2;
  }
  // As torchrun: several workers that each start an OpenMP thread per core would oversubscribe the
  // cores. A program that sets its thread count itself (the apps' --threads) is not affected.
  const int workers = verify_ranks > 0 ? verify_ranks : options.nproc_per_node;
  if (workers > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    options.extra_environment.emplace_back("OMP_NUM_THREADS", "1");
    std::fprintf(stderr,
                 "sgrun: setting OMP_NUM_THREADS=1 for each of the %d workers, as torchrun does, so that they do not "
                 "oversubscribe the cores; set it yourself to tune it\n",
                 workers);
  }
  try {
    if (verify_ranks > 0) return sg::dist::verify_data_parallel(options, verify_ranks, verify_steps, verify_svg);
    return sg::dist::launch(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
