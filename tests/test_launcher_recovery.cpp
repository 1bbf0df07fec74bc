// sgrun and dist::spawn when a job is stopped or loses a worker: jobs of
// tests/dist_worker_collectives stopped while their ranks set up the shared-memory all-reduce
// (nothing may be left in /dev/shm, no worker left running), dist::spawn's ranks running and
// failing, and train_cnn resuming from its snapshot after a worker is killed. SG_SGRUN,
// SG_DIST_WORKER_COLLECTIVES, SG_SPAWN_PROBE and SG_TRAIN_CNN are the binaries' paths.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dist_harness.h"
#include "helpers.h"
#include "sgrun_harness.h"

using namespace sg;
using namespace sg::test;

// ---- a job stopped while its ranks set up the shared-memory all-reduce ----

namespace {

// Whether a file that a process maps or holds open, as /proc names it, is a segment of the
// shared-memory all-reduce (dist/shm_all_reduce.cpp): one named in /dev/shm, or an anonymous one
// (memfd), which /proc shows as "/memfd:<its label> (deleted)".
bool is_segment(const std::string& file) {
  return file.starts_with("/dev/shm/syncgrad-") || file.starts_with("/memfd:syncgrad-");
}

std::string without_deleted(std::string file) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (file.ends_with(kDeleted)) file.resize(file.size() - kDeleted.size());
  return file;
}

// The segments process `pid` maps or holds a descriptor of.
std::set<std::string> segments_of(pid_t pid) {
  const std::filesystem::path proc = "/proc/" + std::to_string(pid);
  std::set<std::string> segments;
  std::ifstream maps(proc / "maps");
  for (std::string line; std::getline(maps, line);)
    if (const size_t file = line.find('/'); file != std::string::npos && is_segment(line.substr(file)))
      segments.insert(without_deleted(line.substr(file)));
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(proc / "fd", error)) {
    const std::string file = std::filesystem::read_symlink(entry.path(), error).string();
    if (!error && is_segment(file)) segments.insert(without_deleted(file));
  }
  return segments;
}

// The state letter of process `pid` ('R', 'S', 'T' for stopped, 'Z'), or 0 when it is gone.
char state_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : 0;
}

// Whether `signal` waits for process `pid` (/proc/<pid>/status: SigPnd for its main thread,
// ShdPnd for the process).
bool is_pending(pid_t pid, int signal) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if ((line.starts_with("SigPnd:") || line.starts_with("ShdPnd:")) &&
        (std::stoull(line.substr(7), nullptr, 16) >> (signal - 1) & 1) != 0)
      return true;
  return false;
}

enum class Stop { sigterm_to_sgrun, sigkill_to_sgrun, sigkill_to_a_rank };

struct StoppedJob {
  Finished run;
  std::set<std::string> segments;  // what the workers mapped or held of segments when they were stopped
  std::vector<pid_t> workers;
};

// Runs a 2-rank job of dist_worker_collectives under sgrun and stops it as `stop` says at the
// moment the first of its workers holds a segment of the shared-memory all-reduce: while the ranks
// make their segments and attach to each other's, the window in which named segments would be left
// in /dev/shm. To stop the job at that very moment the test freezes the workers
// (SIGSTOP) as soon as it sees the segment, notes what they hold, stops the job, and lets each
// frozen worker go on (SIGCONT) only once the signal that ends it is pending: it dies where it was
// frozen, as if the signal had come then.
StoppedJob stop_while_setting_up(Stop stop, const std::vector<std::string>& more_flags = {}) {
  std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--grace-seconds", "3"};
  args.insert(args.end(), more_flags.begin(), more_flags.end());
  args.insert(args.end(), {SG_DIST_WORKER_COLLECTIVES, "a_few_all_reduces"});
  Sgrun sgrun(args, {"SG_SHM_ALLREDUCE=1", "SG_DIST_TIMEOUT=10"});
  StoppedJob job;
  wait_until([&] { return (job.workers = children_of(sgrun.pid())).size() == 2; }, 10);
  REQUIRE(job.workers.size() == 2);
  pid_t first = 0;
  wait_until(
      [&] {
        for (const pid_t worker : job.workers)
          if (!segments_of(worker).empty()) {
            first = worker;
            return true;
          }
        return false;
      },
      10);
  REQUIRE_MESSAGE(first != 0, "no worker made a shared-memory segment within 10 s");
  for (const pid_t worker : job.workers) ::kill(worker, SIGSTOP);
  for (const pid_t worker : job.workers) {
    wait_until([&] { return state_of(worker) == 'T' || state_of(worker) == 'Z' || state_of(worker) == 0; }, 5);
    job.segments.merge(segments_of(worker));
  }
  if (stop == Stop::sigterm_to_sgrun) sgrun.send(SIGTERM);
  if (stop == Stop::sigkill_to_sgrun) sgrun.send(SIGKILL);
  if (stop == Stop::sigkill_to_a_rank) ::kill(first, SIGKILL);
  for (const pid_t worker : job.workers) {
    wait_until([&] { return is_gone(worker) || is_pending(worker, SIGTERM); }, 5);
    ::kill(worker, SIGCONT);
  }
  job.run = sgrun.finish(20);
  return job;
}

// No segment the stopped job held is left in /dev/shm, and no worker is left running.
void check_nothing_left(const StoppedJob& job) {
  INFO(job.run.out, job.run.err);
  CHECK_FALSE(job.segments.empty());
  for (const std::string& segment : job.segments) {
    CAPTURE(segment);
    // A memfd has no path at all: its memory goes with the last process that maps it.
    CHECK_FALSE(std::filesystem::exists(segment));
    std::error_code ignored;
    std::filesystem::remove(segment, ignored);  // so that a failing run, too, leaves /dev/shm clean
  }
  wait_until([&] { return std::all_of(job.workers.begin(), job.workers.end(), is_gone); }, 3);
  for (const pid_t worker : job.workers) CHECK(is_gone(worker));
}

}  // namespace

TEST_CASE("SIGTERM to sgrun while its ranks set up shared memory leaves no segment in /dev/shm and no worker") {
  const StoppedJob job = stop_while_setting_up(Stop::sigterm_to_sgrun);
  CHECK(job.run.exit_code == 128 + SIGTERM);
  check_nothing_left(job);
}

TEST_CASE("SIGKILL to sgrun while its ranks set up shared memory leaves no segment in /dev/shm and no worker") {
  const StoppedJob job = stop_while_setting_up(Stop::sigkill_to_sgrun);
  CHECK(job.run.exit_code == 128 + SIGKILL);
  check_nothing_left(job);
}

TEST_CASE("a rank killed while the ranks set up shared memory leaves no segment, and the restarted group all-reduces") {
  const StoppedJob job = stop_while_setting_up(Stop::sigkill_to_a_rank, {"--max-restarts", "1"});
  CHECK(job.run.exit_code == 0);
  CHECK(test::contains(job.run.err, "failed: SIGKILL"));
  CHECK(test::contains(job.run.err, "restarting (attempt 1 of 1)"));
  CHECK_FALSE(test::contains(job.run.err, "no shared memory"));  // the second attempt had it too
  check_nothing_left(job);
}

#ifdef SG_TRAIN_CNN
TEST_CASE("dist::spawn runs a function on 3 processes of the same program, which rendezvous and all-reduce") {
  Sgrun spawn(SG_SPAWN_PROBE, {"allreduce"}, {});
  const Finished done = spawn.finish(30);
  INFO(done.out, done.err);
  REQUIRE(done.exit_code == 0);
  for (int rank = 0; rank < 3; ++rank)
    CHECK(done.out.find("[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + " of 3: sum 6") !=
          std::string::npos);
  CHECK(done.out.find("spawn returned") != std::string::npos);
  // Only the parent gets past spawn().
  CHECK(done.out.find("spawn returned") == done.out.rfind("spawn returned"));
}

TEST_CASE("dist::spawn: a failing rank stops the others and its error names the rank, exit code and last lines") {
  Sgrun spawn(SG_SPAWN_PROBE, {"fail"}, {});
  const Finished done = spawn.finish(30);
  INFO(done.out, done.err);
  CHECK(done.exit_code == 4);
  CHECK(done.err.find("dist::spawn: rank 1 of 3 failed (exit code 1)") != std::string::npos);
  CHECK(done.err.find("[rank 1] rank 1 gives up on purpose") != std::string::npos);
  CHECK(done.out.find("spawn returned") == std::string::npos);
  // The other ranks sleep for a minute unless stopped: the group was stopped, not waited for.
  CHECK(done.seconds < 20);
}

TEST_CASE(
    "train_cnn under sgrun survives a worker killed with SIGKILL: the group restarts and resumes from its snapshot") {
  const std::string snapshot = "test_launcher_snapshot.safetensors";
  std::filesystem::remove(snapshot);
  Sgrun sgrun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--grace-seconds", "2", SG_TRAIN_CNN,
               "--epochs", "2", "--train-subset", "3000", "--batch-size", "32", "--snapshot", snapshot});
  REQUIRE(sgrun.wait_for_output("epoch 1: test loss", 1, 120));
  // The snapshot follows that line once every rank has handed in its generator's state (a
  // collective), so a worker killed before then leaves nothing to resume from.
  wait_until([&] { return std::filesystem::exists(snapshot); }, 60);
  REQUIRE(std::filesystem::exists(snapshot));
  // Epoch 2 is under way (3000 images take seconds): kill one worker the way the OOM killer would.
  const std::vector<pid_t> workers = children_of(sgrun.pid());
  REQUIRE(workers.size() == 2);
  ::kill(workers[1], SIGKILL);
  const Finished run = sgrun.finish(180);
  INFO(run.out, run.err);
  CHECK(run.exit_code == 0);
  CHECK(test::contains(run.err, "restarting (attempt 1 of 1)"));
  CHECK(test::contains(run.out, "resumed from " + snapshot + " after epoch 1"));
  CHECK(test::contains(run.out, "epoch 2: test loss"));
  CHECK(!test::contains(run.out, "epoch 1/2"));  // the restarted group did not train epoch 1 again
  std::filesystem::remove(snapshot);
}
#endif
