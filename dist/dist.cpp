#include "dist/dist.h"

#include <csignal>
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>

#include "core/cuda_runtime/runtime.h"
#include "dist/environment.h"
#include "dist/process_group_gloo.h"
#include "dist/process_group_nccl.h"
#include "dist/reducer.h"
#include "dist/tcp_store.h"

namespace sg::dist {

namespace {

struct DefaultGroup {
  std::shared_ptr<TcpStore> store;
  std::unique_ptr<ProcessGroup> group;
  int local_rank = 0;
  int local_world_size = 1;
};
DefaultGroup& state() {
  static DefaultGroup instance;
  return instance;
}

// Every rank registers, then waits until all `world` have; rank 0 says who is missing.
void wait_for_all_ranks(TcpStore& store, int rank, int world, std::chrono::milliseconds timeout) {
  store.set("arrived/" + std::to_string(rank), {'1'});
  store.add("arrived", 1);
  const auto start = std::chrono::steady_clock::now();
  auto next_report = start + std::chrono::seconds(5);
  for (;;) {
    if (store.add("arrived", 0) >= world) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_report || now - start >= timeout) {
      std::ostringstream missing;
      for (int r = 0, listed = 0; r < world; ++r)
        if (!store.check({"arrived/" + std::to_string(r)})) missing << (listed++ ? ", " : "") << r;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
      SG_CHECK(now - start < timeout, "init_process_group (rank ", rank, " of ", world, "): rank(s) ", missing.str(),
               " did not join within ", waited, " s (the store is at ", store.address(), ")");
      if (rank == 0)
        std::fprintf(stderr, "init_process_group: waiting for rank(s) %s to join (%lld s so far)\n",
                     missing.str().c_str(), static_cast<long long>(waited));
      next_report = now + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// NCCL: one GPU per process, cuda:LOCAL_RANK, made current for this thread before the
// communicator joins (NCCL binds it to the current device) and for the program's tensors.
void select_gpu(int local_rank) {
  SG_CHECK(cuda::is_available(), "init_process_group: backend 'nccl' needs a GPU: ", cuda::unavailable_reason(),
           " (use backend 'gloo' for CPU tensors)");
  SG_CHECK(local_rank < cuda::device_count(),
           "init_process_group: backend 'nccl' gives each process the GPU of its "
           "LOCAL_RANK, but LOCAL_RANK=",
           local_rank, " and this machine has ", cuda::device_count(),
           " GPU(s); start at most that many processes per machine");
  cuda::set_device(local_rank);
}

}  // namespace

void init_process_group(InitOptions options) {
  SG_CHECK(!is_initialized(),
           "init_process_group: the default group is already initialised "
           "(call destroy_process_group first)");
  const bool nccl = options.backend == "nccl";
  SG_CHECK(options.backend == "gloo" || nccl, "init_process_group: unknown backend '", options.backend,
           "' (gloo for CPU tensors, nccl for CUDA tensors)");
  LaunchEnvironment env;
  if (options.rank < 0 || options.world_size < 0) {
    const auto from_environment = launch_environment();
    SG_CHECK(from_environment.has_value(),
             "init_process_group: no rank given and none in the environment. Start the program with sgrun "
             "(or torchrun, srun, mpirun), or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
    env = *from_environment;
  } else {
    env.rank = options.rank;
    env.world_size = options.world_size;
    env.local_rank = options.rank;
    env.local_world_size = options.world_size;
    if (const auto from_environment = launch_environment()) {
      env.master_addr = from_environment->master_addr;
      env.master_port = from_environment->master_port;
    }
  }
  if (!options.master_addr.empty()) env.master_addr = options.master_addr;
  if (options.master_port > 0) env.master_port = options.master_port;
  SG_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size, "init_process_group: rank ", env.rank,
           " is not in [0, world_size = ", env.world_size, ")");
  if (const auto timeout = timeout_from_environment()) options.timeout = *timeout;
  SG_CHECK(options.timeout.count() > 0 && options.timeout <= std::chrono::duration<double>(kMaxTimeoutSeconds),
           "init_process_group: the timeout of ", options.timeout.count(), " ms is not in (0, ", kMaxTimeoutSeconds,
           " s] (at most one week)");
  options.debug = options.debug || debug_from_environment();
  if (nccl) select_gpu(env.local_rank);
  std::signal(SIGPIPE, SIG_IGN);  // Gloo writes without MSG_NOSIGNAL: a dead peer must be an error, not a signal

  auto store = std::make_shared<TcpStore>(env.master_addr, env.master_port, env.rank == 0, options.timeout,
                                          store_token_from_environment());
  if (env.rank == 0)
    if (const auto warning = loopback_master_warning(env, store->local_address()))
      std::fprintf(stderr, "init_process_group: %s\n", warning->c_str());
  store->register_rank(env.rank);  // so a failed collective can tell a rank that exited (dist/tcp_store_server.cpp)
  wait_for_all_ranks(*store, env.rank, env.world_size, options.timeout);
  DefaultGroup& group = state();
  if (!nccl) {
    group.group = std::make_unique<ProcessGroupGloo>(store, env.rank, env.world_size, options.timeout, options.debug);
  } else if constexpr (kCudaBuild) {  // select_gpu has thrown in a CPU-only build
    group.group =
        make_nccl_process_group(store, env.rank, env.world_size, env.local_rank, options.timeout, options.debug);
  }
  group.store = store;
  group.local_rank = env.local_rank;
  group.local_world_size = env.local_world_size;
}

void destroy_process_group() {
  DefaultGroup& group = state();
  group.group.reset();  // finishes queued collectives, then joins the communication thread
  group.store.reset();
  group.local_rank = 0;
  group.local_world_size = 1;
}

bool is_initialized() { return state().group != nullptr; }
int get_rank() { return is_initialized() ? state().group->rank() : 0; }
int get_world_size() { return is_initialized() ? state().group->size() : 1; }
int get_local_rank() { return state().local_rank; }
int get_local_world_size() { return state().local_world_size; }

ProcessGroup& default_group() {
  SG_CHECK(is_initialized(), "dist: no process group; call dist::init_process_group() first");
  return *state().group;
}

void all_reduce(Tensor& tensor, ReduceOp op) { default_group().all_reduce(tensor, op)->wait(); }
void broadcast(Tensor& tensor, int root) { default_group().broadcast(tensor, root)->wait(); }
void barrier() { default_group().barrier()->wait(); }

}  // namespace sg::dist
