#include "launch/spawn.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "launch/launcher.h"

namespace sg::dist {
namespace {

constexpr char kSpawnedVariable[] = "SG_SPAWNED";

// This program's path and arguments as it was started: /proc/self/cmdline, NUL-separated. The
// path is /proc/self/exe, which names this binary even if it was started through PATH or the
// file has since been replaced.
std::vector<std::string> this_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  SG_CHECK(!all.empty(), "dist::spawn: cannot read this program's command line from /proc/self/cmdline");
  std::vector<std::string> arguments;
  for (size_t begin = 0; begin < all.size();) {
    const size_t end = all.find('\0', begin);
    arguments.push_back(all.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof path - 1);
  SG_CHECK(length > 0, "dist::spawn: cannot find this program's file through /proc/self/exe");
  arguments.front().assign(path, static_cast<size_t>(length));
  return arguments;
}

// A spawned process: the rank's work, then the end of the process (Note [How spawn starts its
// processes]). The variable goes first, so that a spawn() inside fn launches for real.
[[noreturn]] void run_spawned(const std::function<void(int)>& fn) {
  ::unsetenv(kSpawnedVariable);
  const char* rank = std::getenv("RANK");
  try {
    SG_CHECK(rank != nullptr, "dist::spawn: ", kSpawnedVariable, " is set but RANK is not");
    fn(std::stoi(rank));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    std::exit(1);
  }
  std::exit(0);
}

}  // namespace

void spawn(const std::function<void(int rank)>& fn, int nprocs, const SpawnOptions& options) {
  if (std::getenv(kSpawnedVariable) != nullptr) run_spawned(fn);
  SG_CHECK(nprocs >= 1, "dist::spawn: nprocs must be at least 1, got ", nprocs);
  LaunchOptions launch_options;
  launch_options.nproc_per_node = nprocs;
  launch_options.standalone = true;
  launch_options.max_restarts = options.max_restarts;
  launch_options.grace_seconds = options.grace_seconds;
  launch_options.command = this_command_line();
  launch_options.extra_environment = {{kSpawnedVariable, "1"}};
  LaunchFailure failure;
  if (launch(launch_options, &failure) == 0) return;
  SG_CHECK(failure.rank >= 0, "dist::spawn: interrupted by ", failure.how, "; the ", nprocs, " processes were stopped");
  SG_FAIL("dist::spawn: rank ", failure.rank, " of ", nprocs, " failed (", failure.how,
          "); the others were stopped. Its last lines of stderr:\n", failure.last_output);
}

}  // namespace sg::dist
