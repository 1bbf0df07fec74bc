#pragma once
// defines: run_ranks (starts one process per rank of a distributed test and collects their exit
//          codes and output), has_sanitizer_report, AppRun / run_app, TempDir, read_text,
//          contains — what the multi-process tests and the tests of the apps share.
//
// Workers are separate executables started with posix_spawn: a child fork()ed after OpenMP was
// used would hang at its first parallel region (libgomp).
#include <string>
#include <utility>
#include <vector>

namespace sg::test {

struct RankResults {
  std::vector<int> exit_codes;       // 128 + signal for a signal; -1 for a rank killed at the time limit
  std::vector<std::string> outputs;  // stdout and stderr together
  bool timed_out = false;

  bool all_succeeded() const;
  int exit_code(int rank) const { return exit_codes.at(static_cast<size_t>(rank)); }
  const std::string& output(int rank) const { return outputs.at(static_cast<size_t>(rank)); }
  std::string summary() const;  // every rank's exit code and output, for failure messages
};

// Runs `program args...` as ranks 0 .. world - 1 with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT and SG_DIST_TIMEOUT=20 (so a hang
// fails within the test) set, plus `env` (which may override them). "{rank}" in an argument
// becomes the rank's number (a file per rank: "data_config.path=text{rank}.txt"). Kills every rank still
// running after `time_limit_seconds` (4 times that under ThreadSanitizer). A rank whose output
// holds a sanitizer report fails the test.
RankResults run_ranks(const std::string& program, int world, const std::vector<std::string>& args,
                      const std::vector<std::pair<std::string, std::string>>& env = {}, double time_limit_seconds = 60);

// Whether `output` holds the report of a sanitizer (TSan, ASan, LSan, UBSan) built into the program.
bool has_sanitizer_report(const std::string& output);

// An app run on `processes` ranks (1: the program alone, as a user starts it): rank 0's exit
// code and output (stdout and stderr together). A run past `time_limit_seconds` fails the test.
struct AppRun {
  int exit_code = 0;
  std::string output;
};
AppRun run_app(const std::string& program, const std::vector<std::string>& args, int processes = 1,
               double time_limit_seconds = 120);

// A fresh directory under the system's temporary directory, removed with its contents at scope exit.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::string read_text(const std::string& path);

// Sets the learning rate of every parameter group in the optimizer state of the snapshot at `path`
// (an app's --snapshot: Note [Checkpoint layout] in optim/checkpoint.h), and the base lrs of its
// schedule if it has one, leaving its weights as they are, so that a run resumed from it goes on
// at `lr` (times the schedule's factor): 1e30 makes a good snapshot diverge.
void set_snapshot_lr(const std::string& path, double lr);

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace sg::test
