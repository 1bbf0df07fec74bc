#pragma once
// defines: LaunchFailure, worker_environment, find_free_port, launch — what `sgrun` (syncgrad's
//          torchrun, apps/sgrun.cpp) does: start this node's workers, label their output, forward
//          signals, and restart the whole group when a worker fails. The options it runs with, and
//          their checks, are launch/launch_options.h's.
//
// Note [sgrun's process model]
// - Workers are started with fork + exec, never a bare fork: a forked copy of a process that
//   used OpenMP hangs at its first parallel region (libgomp's threads do not survive fork), and
//   exec gives every worker a fresh process that reads its rank from the environment, exactly
//   as under torchrun. Between fork and exec the child makes system calls only.
// - A worker dies with its launcher: it asks the kernel for SIGKILL when its parent exits
//   (PR_SET_PDEATHSIG), so even a SIGKILL to sgrun leaves no orphans training on. The "parent" is
//   the thread that forked: call launch() from a thread that outlives the workers.
// - All workers of one attempt share a new process group, apart from the launcher's. Ctrl-C in a
//   terminal then reaches the launcher alone, which forwards that SIGINT (or a SIGTERM, SIGHUP
//   or SIGQUIT) to the group once; a kill of the group also reaches any process a worker started.
//   Workers read stdin from /dev/null (a background group reading the terminal would be stopped).
// - Each worker's stdout and stderr are pipes the launcher reads in one poll loop, writing every
//   line with a "[rank N] " prefix to its own stdout / stderr (Note [Prefixing lines that end
//   in '\r'] in launch/line_prefixer.h).
// - Failure: the first worker that exits non-zero or by a signal fails the attempt. The others get
//   SIGTERM, then SIGKILL after `grace_seconds`; if restarts remain, the whole group starts again
//   with SG_RESTART_COUNT one higher (a fresh port with --standalone), otherwise launch returns
//   the failing worker's exit code (128 + signal number for a signal, as a shell reports it).
//   Apps survive a restart by resuming from their last snapshot (docs/launcher.md).
// - The first SIGINT / SIGTERM / SIGHUP / SIGQUIT to the launcher is forwarded, ends the run
//   without restarts, and launch returns 128 + that signal; workers still running after
//   grace_seconds get SIGKILL.
// - Several nodes: every node runs its own sgrun with the same --nnodes / --master-addr /
//   --master-port and its --node-rank; ranks are node_rank * nproc_per_node + local_rank. The
//   launchers do not talk to each other: when a worker dies, the workers on the other nodes fail
//   in their next collective (a peer that vanished is an error, never a hang), so every node's
//   group fails and, given restarts, restarts.
#include <string>
#include <utility>
#include <vector>

#include "launch/launch_options.h"

namespace sg::dist {

// How the attempt that ended a launch failed, for callers that report it themselves (dist::spawn).
struct LaunchFailure {
  int rank = -1;            // the first worker that failed; -1 when the launcher was interrupted
  std::string how;          // "exit code 3", "SIGSEGV", or the signal that interrupted the launcher
  std::string last_output;  // that worker's last lines of stderr (up to ~10, "[rank N] " prefixed)
};

// The variables worker `local_rank` gets on top of the launcher's own environment:
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the node rank), MASTER_ADDR,
// MASTER_PORT (= master_port), SG_RESTART_COUNT (= restart_count) and SG_MAX_RESTARTS, the same
// two under torchrun's names (TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS) for scripts
// written for it, when options.store_token is set, SG_STORE_TOKEN, and options.extra_environment.
std::vector<std::pair<std::string, std::string>> worker_environment(const LaunchOptions& options, int local_rank,
                                                                    int master_port, int restart_count);

// A TCP port no socket is bound to right now (the kernel's pick for port 0 on all interfaces).
// Another process may take it before the store binds it; in practice that window is tiny.
int find_free_port();

// Runs the workers as Note [sgrun's process model] describes and returns the launcher's exit
// code: 0 when every worker of an attempt exited 0. Prints its own messages to stderr as "sgrun: ...".
// When it returns non-zero and `failure` is given, fills it in.
int launch(const LaunchOptions& options, LaunchFailure* failure = nullptr);

}  // namespace sg::dist
