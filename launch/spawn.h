#pragma once
// defines: dist::spawn, SpawnOptions — run a function on N processes from inside a program, as
//          PyTorch's torch.multiprocessing.spawn and Accelerate's notebook_launcher do: no sgrun
//          on the command line.
//
// Note [How spawn starts its processes]
// spawn cannot fork and call the function in the copy: a forked copy of a process that used
// OpenMP hangs at its first parallel region (Note [sgrun's process model] in launch/launcher.h). So
// it starts this same program again, N times, with the same arguments, through the launcher
// (dist::launch: output labelled "[rank N] ", signals forwarded, the group stopped when one
// fails), with SG_SPAWNED set in their environment. In each of those processes the program runs
// from main() again, reaches the same spawn() call, finds SG_SPAWNED, and runs fn(rank) instead of
// launching; then the process exits: 0 when fn returned, 1 when it threw (the error printed
// first). So everything main() does before spawn() runs N + 1 times — as Python's spawn start
// method re-imports the main module: call spawn() early, before work only the parent should do.
//
//   int main() {
//     dist::spawn([](int rank) {
//       dist::init_process_group();   // RANK, WORLD_SIZE, MASTER_ADDR, ... are set
//       ... train ...
//     }, 2);
//     // here only in the parent, after every process succeeded
//   }
#include <functional>

namespace sg::dist {

struct SpawnOptions {
  int max_restarts = 0;        // restarts of the whole group after a process failed
  double grace_seconds = 5.0;  // between asking the others to stop (SIGTERM) and SIGKILL
};

// In the program as started: runs fn(0) .. fn(nprocs - 1) in nprocs processes on this machine
// (rendezvous on a free loopback port) and returns when all of them have exited. The first
// failure stops the others and throws an sg::Error naming its rank, its exit code or signal, and
// its last lines of stderr. In a process spawn started: runs fn(rank) and ends the process; never
// returns.
void spawn(const std::function<void(int rank)>& fn, int nprocs, const SpawnOptions& options = {});

}  // namespace sg::dist
