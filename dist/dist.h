#pragma once
// defines: init_process_group, destroy_process_group, is_initialized, get_rank, get_world_size,
//          get_local_rank, is_main_process, default_group, and the collectives on the default
//          group — torch.distributed's module-level API.
//
//   dist::init_process_group();            // RANK, WORLD_SIZE, MASTER_ADDR, ... from sgrun
//   Tensor t = ...;
//   dist::all_reduce(t);                   // t now holds the sum over all ranks
//   dist::destroy_process_group();
#include <chrono>
#include <string>

#include "dist/process_group.h"

namespace sg::dist {

struct InitOptions {
  // "gloo": collectives on CPU tensors. "nccl": on CUDA tensors, each process on the GPU of its
  // LOCAL_RANK, which init_process_group makes the current device.
  std::string backend = "gloo";
  // -1 / empty / 0: read from the environment (dist/environment.h: torchrun/sgrun, Slurm or
  // Open MPI variables; MASTER_ADDR and MASTER_PORT default to 127.0.0.1:29500).
  int rank = -1;
  int world_size = -1;
  std::string master_addr;
  int master_port = 0;
  // Rendezvous and every collective fail after this long (SG_DIST_TIMEOUT, in seconds, overrides
  // the default of 30 minutes); at most one week (dist/environment.h).
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // Exchange a fingerprint of every collective first (SG_DIST_DEBUG=1 turns it on; Gloo only).
  bool debug = false;
};

// Joins the default group: rank 0 starts the TCP store at MASTER_ADDR:MASTER_PORT, every rank
// registers there, rank 0 prints which ranks are still missing every few seconds, and once all
// have arrived Gloo connects every pair. Throws naming the missing ranks after the timeout.
void init_process_group(InitOptions options = {});
void destroy_process_group();
bool is_initialized();

// Without a group: rank 0 of 1 (so single-process code needs no special case).
int get_rank();
int get_world_size();
int get_local_rank();
int get_local_world_size();
inline bool is_main_process() { return get_rank() == 0; }
inline bool is_local_main_process() { return get_local_rank() == 0; }

// Throws when no group is initialised.
ProcessGroup& default_group();

// Synchronous collectives on the default group.
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM);
void broadcast(Tensor& tensor, int root = 0);
void barrier();

}  // namespace sg::dist
