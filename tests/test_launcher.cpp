// The launcher: LinePrefixer and the option / environment logic in-process, then the real sgrun
// binary running tests/launcher_probe workers (environment, output labels, exit codes, killing
// the group, restarts, signal forwarding), and jobs of tests/dist_worker_collectives stopped while
// their ranks set up the shared-memory all-reduce. SG_SGRUN, SG_LAUNCHER_PROBE, ... are the
// binaries' paths.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dist_harness.h"
#include "helpers.h"
#include "launch/launcher.h"
#include "launch/line_prefixer.h"

extern char** environ;

using namespace sg;

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point seconds_from_now(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// ---- running sgrun ----

struct Finished {
  int exit_code;  // 128 + signal if sgrun itself was killed
  std::string out;
  std::string err;
  double seconds;
};

// sgrun with its stdout and stderr captured. Every wait has a deadline: a launcher that hangs
// fails the test (and is killed) instead of stalling the suite.
class Sgrun {
public:
  explicit Sgrun(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {})
      : Sgrun(SG_SGRUN, args, extra_env) {}
  // Another program that launches workers (spawn_probe, through dist::spawn).
  Sgrun(const std::string& program, const std::vector<std::string>& args, const std::vector<std::string>& extra_env)
      : start_(Clock::now()) {
    std::vector<std::string> argv_strings = {program};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings = extra_env;
    for (char** entry = environ; *entry; ++entry) env_strings.emplace_back(*entry);
    std::vector<char*> argv, envp;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    for (std::string& s : env_strings) envp.push_back(s.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);

    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    const int error = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
    REQUIRE(error == 0);
  }
  ~Sgrun() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (const int fd : fds_)
      if (fd >= 0) ::close(fd);
  }

  // Reads until stdout holds `text` `times` times; false at the deadline or the end of output.
  bool wait_for_output(const std::string& text, int times, double timeout_seconds) {
    const auto deadline = seconds_from_now(timeout_seconds);
    while (count(out_, text) < times) {
      if (Clock::now() >= deadline || !read_some(deadline)) return false;
    }
    return true;
  }

  void send(int signal) { ::kill(pid_, signal); }
  pid_t pid() const { return pid_; }

  // Reads everything and reaps sgrun; a run past the deadline fails the test.
  Finished finish(double timeout_seconds = 10) {
    const auto deadline = seconds_from_now(timeout_seconds);
    while (Clock::now() < deadline && read_some(deadline)) {}
    const bool in_time = fds_[0] < 0 && fds_[1] < 0;
    CHECK_MESSAGE(in_time, "sgrun still running after ", timeout_seconds, " s; output so far:\n", out_, err_);
    if (!in_time) ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    const int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return {code, out_, err_, std::chrono::duration<double>(Clock::now() - start_).count()};
  }

private:
  static int count(const std::string& haystack, const std::string& needle) {
    int n = 0;
    for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
    return n;
  }

  // Waits (until the deadline) for output and appends it; false once both streams ended.
  bool read_some(Clock::time_point deadline) {
    std::vector<pollfd> polled;
    for (const int fd : fds_)
      if (fd >= 0) polled.push_back({fd, POLLIN, 0});
    if (polled.empty()) return false;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::max<int64_t>(left, 0))) <= 0) return true;
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      pollfd probe = {fds_[i], POLLIN, 0};
      if (::poll(&probe, 1, 0) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds_[i], buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? out_ : err_).append(buffer, static_cast<size_t>(n));
      } else {
        ::close(fds_[i]);
        fds_[i] = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string out_, err_;
  Clock::time_point start_;
};

Finished run_sgrun(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
  Sgrun sgrun(args, extra_env);
  return sgrun.finish();
}

// The lines of `text` that rank `rank` wrote, without the prefix, in order; rank -1: all lines.
std::vector<std::string> lines_of(const std::string& text, int rank) {
  const std::string prefix = rank < 0 ? "" : "[rank " + std::to_string(rank) + "] ";
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.starts_with(prefix)) lines.push_back(line.substr(prefix.size()));
    start = end + 1;
  }
  return lines;
}

// The processes whose parent is `parent` (read from /proc/<pid>/stat: "pid (name) state ppid ...").
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) children.push_back(std::stoi(name));
  }
  return children;
}

// Whether process `pid` is gone: reaped, or a zombie that only waits for its new parent to reap it.
bool is_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

// ---- LinePrefixer ----

TEST_CASE("LinePrefixer labels every line and treats '\\r' as a line end, whatever the chunking") {
  const std::string stream = "loss 0.5\n40%\r50%\r\n\nlast";
  const std::string expected = "[rank 1] loss 0.5\n[rank 1] 40%\r[rank 1] 50%\r\n[rank 1] \n[rank 1] last\n";
  // Any split of the stream into two chunks gives the same output: partial lines are held.
  for (size_t split = 0; split <= stream.size(); ++split) {
    CAPTURE(split);
    dist::LinePrefixer prefixer("[rank 1] ");
    std::string out = prefixer.feed(stream.substr(0, split));
    out += prefixer.feed(stream.substr(split));
    out += prefixer.finish();
    CHECK(out == expected);
  }
}

TEST_CASE("LinePrefixer holds an unfinished line and breaks one longer than its limit") {
  dist::LinePrefixer prefixer("> ", 8);
  CHECK(prefixer.feed("abc") == "");
  CHECK(prefixer.feed("defghij\nk") == "> abcdef\n> ghij\n");  // "> abcdef" is 8 bytes
  CHECK(prefixer.finish() == "> k\n");
  CHECK(prefixer.finish() == "");
}

// ---- options and environment, in-process ----

TEST_CASE("worker_environment numbers ranks across nodes as torchrun does") {
  dist::LaunchOptions options;
  options.nproc_per_node = 3;
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "10.0.0.7";
  options.max_restarts = 4;
  std::map<std::string, std::string> env;
  for (const auto& [key, value] : dist::worker_environment(options, 2, 23456, 1)) env[key] = value;
  CHECK(env == std::map<std::string, std::string>{{"RANK", "5"},
                                                  {"LOCAL_RANK", "2"},
                                                  {"WORLD_SIZE", "6"},
                                                  {"LOCAL_WORLD_SIZE", "3"},
                                                  {"GROUP_RANK", "1"},
                                                  {"MASTER_ADDR", "10.0.0.7"},
                                                  {"MASTER_PORT", "23456"},
                                                  {"SG_RESTART_COUNT", "1"},
                                                  {"SG_MAX_RESTARTS", "4"},
                                                  {"TORCHELASTIC_RESTART_COUNT", "1"},
                                                  {"TORCHELASTIC_MAX_RESTARTS", "4"}});
  CHECK_THROWS_AS(dist::worker_environment(options, 3, 23456, 0), Error);
}

TEST_CASE("check_launch_options names the flag that is wrong") {
  const auto message = [](auto change) {
    dist::LaunchOptions options;
    options.command = {"true"};
    change(options);
    try {
      dist::check_launch_options(options);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  CHECK(message([](dist::LaunchOptions&) {}) == "(no error)");
  CHECK(test::contains(message([](dist::LaunchOptions& o) {
                         o.nnodes = 2;
                         o.node_rank = 2;
                       }),
                       "--node-rank 2"));
  CHECK(test::contains(message([](dist::LaunchOptions& o) { o.nproc_per_node = 0; }), "--nproc-per-node"));
  CHECK(test::contains(message([](dist::LaunchOptions& o) {
                         o.standalone = true;
                         o.nnodes = 2;
                       }),
                       "--standalone"));
  CHECK(test::contains(message([](dist::LaunchOptions& o) { o.master_port = 70000; }), "--master-port"));
  CHECK(test::contains(message([](dist::LaunchOptions& o) { o.max_restarts = -1; }), "--max-restarts"));
  CHECK(test::contains(message([](dist::LaunchOptions& o) { o.command.clear(); }), "no program"));
}

TEST_CASE("find_free_port returns a port that can be bound") {
  const int port = dist::find_free_port();
  REQUIRE(port > 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  ::close(fd);
}

// ---- sgrun with probe workers ----

TEST_CASE("sgrun gives each worker its rank, the world and the master address, the rest of the environment passes") {
  const Finished run = run_sgrun({"--nproc-per-node", "2", "--nnodes", "3", "--node-rank", "1", "--master-addr",
                                  "10.1.2.3", "--master-port", "23456", SG_LAUNCHER_PROBE, "env"},
                                 {"RANK=99", "SG_PROBE_INHERITED=yes"});
  REQUIRE(run.exit_code == 0);
  for (const int local_rank : {0, 1}) {
    const int rank = 2 + local_rank;
    CHECK(lines_of(run.out, rank) ==
          std::vector<std::string>{"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(local_rank),
                                   "WORLD_SIZE=6", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "MASTER_ADDR=10.1.2.3",
                                   "MASTER_PORT=23456", "SG_RESTART_COUNT=0", "SG_MAX_RESTARTS=0",
                                   "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_MAX_RESTARTS=0",
                                   "SG_STORE_TOKEN=(unset)", "SG_PROBE_INHERITED=yes"});
  }
  // Several nodes cannot agree on a token by themselves: sgrun says that the store is open.
  CHECK(test::contains(run.err, "SG_STORE_TOKEN is not set"));
}

TEST_CASE("sgrun sets OMP_NUM_THREADS=1 for several workers unless it is set, as torchrun does") {
  const char* outer = std::getenv("OMP_NUM_THREADS");
  const std::optional<std::string> saved = outer ? std::optional<std::string>(outer) : std::nullopt;
  ::unsetenv("OMP_NUM_THREADS");
  const Finished two = run_sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "omp"});
  const Finished one = run_sgrun({"--nproc-per-node", "1", SG_LAUNCHER_PROBE, "omp"});
  const Finished given = run_sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "omp"}, {"OMP_NUM_THREADS=3"});
  if (saved) ::setenv("OMP_NUM_THREADS", saved->c_str(), 1);
  for (const int rank : {0, 1}) {
    CHECK(lines_of(two.out, rank) == std::vector<std::string>{"OMP_NUM_THREADS=1"});
    CHECK(lines_of(given.out, rank) == std::vector<std::string>{"OMP_NUM_THREADS=3"});
  }
  CHECK(test::contains(two.err, "sgrun: setting OMP_NUM_THREADS=1 for each of the 2 workers"));
  CHECK(lines_of(one.out, 0) == std::vector<std::string>{"OMP_NUM_THREADS=(unset)"});
  CHECK(!test::contains(given.err, "setting OMP_NUM_THREADS"));
}

TEST_CASE("sgrun runs torchrun's command lines as written") {
  const Finished run = run_sgrun({"--nproc_per_node=2", "--nnodes=2:2", "--node_rank=1", "--max_restarts=0",
                                  "--rdzv_endpoint=10.1.2.3:23456", SG_LAUNCHER_PROBE, "env"});
  REQUIRE(run.exit_code == 0);
  const std::vector<std::string> rank3 = lines_of(run.out, 3);
  REQUIRE(rank3.size() > 6);
  CHECK(rank3[0] == "RANK=3");
  CHECK(rank3[2] == "WORLD_SIZE=4");
  CHECK(rank3[5] == "MASTER_ADDR=10.1.2.3");
  CHECK(rank3[6] == "MASTER_PORT=23456");
  const Finished standalone = run_sgrun({"--standalone", "--nproc_per_node", "cpu", SG_LAUNCHER_PROBE, "env"});
  CHECK(standalone.exit_code == 0);
  CHECK(lines_of(standalone.out, static_cast<int>(std::thread::hardware_concurrency()) - 1).size() > 0);
  const Finished elastic = run_sgrun({"--nnodes", "1:4", SG_LAUNCHER_PROBE, "env"});
  CHECK(elastic.exit_code == 1);
  CHECK(test::contains(elastic.err, "--nnodes 1:4 asks for an elastic job"));
}

TEST_CASE("torchrun's flag values: gpu, cpu and auto process counts, N:N nodes, host:port endpoints") {
  CHECK(dist::parse_nproc_per_node("3", 0, 2) == 3);
  CHECK(dist::parse_nproc_per_node("cpu", 4, 16) == 16);
  CHECK(dist::parse_nproc_per_node("gpu", 8, 16) == 8);
  CHECK(dist::parse_nproc_per_node("auto", 8, 16) == 8);
  CHECK(dist::parse_nproc_per_node("auto", 0, 16) == 16);
  CHECK_THROWS_WITH_AS(dist::parse_nproc_per_node("gpu", 0, 16), doctest::Contains("no GPU is visible"), Error);
  CHECK_THROWS_WITH_AS(dist::parse_nproc_per_node("0", 0, 16), doctest::Contains("got '0'"), Error);
  CHECK_THROWS_WITH_AS(dist::parse_nproc_per_node("2x", 0, 16), doctest::Contains("got '2x'"), Error);
  CHECK(dist::parse_nnodes("2") == 2);
  CHECK(dist::parse_nnodes("3:3") == 3);
  CHECK_THROWS_WITH_AS(dist::parse_nnodes("1:4"), doctest::Contains("sgrun runs a fixed number of nodes"), Error);
  CHECK_THROWS_WITH_AS(dist::parse_nnodes("two"), doctest::Contains("got 'two'"), Error);
  CHECK(dist::parse_rendezvous_endpoint("node7:29500") == std::pair<std::string, int>{"node7", 29500});
  CHECK(dist::parse_rendezvous_endpoint("[fe80::1]:29400") == std::pair<std::string, int>{"fe80::1", 29400});
  CHECK_THROWS_WITH_AS(dist::parse_rendezvous_endpoint("node7"), doctest::Contains("must be host:port"), Error);
  CHECK_THROWS_WITH_AS(dist::parse_rendezvous_endpoint("node7:99999"), doctest::Contains("no port in 1 .. 65535"),
                       Error);
}

TEST_CASE("on one node sgrun gives all workers one random store token per job, a token it is given passes on") {
  const auto tokens_of = [](const Finished& run) {
    std::vector<std::string> tokens;
    for (const std::string& line : lines_of(run.out, -1))
      if (const size_t at = line.find("SG_STORE_TOKEN="); at != std::string::npos)
        tokens.push_back(line.substr(at + 15));
    return tokens;
  };
  const std::vector<std::string> first = tokens_of(run_sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "env"}));
  const std::vector<std::string> second = tokens_of(run_sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "env"}));
  REQUIRE(first.size() == 2);
  REQUIRE(second.size() == 2);
  CHECK(first[0] == first[1]);
  CHECK(first[0].size() == 32);  // 128 random bits in hex
  CHECK(first[0] != second[0]);
  const Finished given =
      run_sgrun({"--nproc-per-node", "2", "--nnodes", "2", "--master-addr", "127.0.0.1", SG_LAUNCHER_PROBE, "env"},
                {"SG_STORE_TOKEN=shared-by-all-nodes"});
  CHECK(tokens_of(given) == std::vector<std::string>{"shared-by-all-nodes", "shared-by-all-nodes"});
  CHECK_FALSE(test::contains(given.err, "SG_STORE_TOKEN is not set"));
}

TEST_CASE("sgrun prefixes every line of every worker, on stdout and stderr") {
  const Finished run = run_sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "lines"});
  REQUIRE(run.exit_code == 0);
  for (const int rank : {0, 1}) {
    const std::string r = std::to_string(rank);
    CHECK(lines_of(run.out, rank) == std::vector<std::string>{"first line of rank " + r, "second line of rank " + r,
                                                              "step 1\r[rank " + r + "] step 2\r", "unfinished"});
    CHECK(lines_of(run.err, rank) == std::vector<std::string>{"a warning from rank " + r});
  }
  // Nothing reached stdout without a label.
  CHECK(lines_of(run.out, 0).size() + lines_of(run.out, 1).size() == lines_of(run.out, -1).size());
}

TEST_CASE("a failing worker stops the group at once and sgrun exits with its code") {
  const Finished run = run_sgrun({"--nproc-per-node", "3", SG_LAUNCHER_PROBE, "fail", "1", "7"});
  CHECK(run.exit_code == 7);
  CHECK(run.seconds < 3);  // the sleepers (30 s) were killed, not waited for
  CHECK(test::contains(run.err, "worker rank 1 (local rank 1"));
  CHECK(test::contains(run.err, "exit code 7"));
  CHECK(test::contains(run.err, "no restarts left"));
}

TEST_CASE("a worker killed by a signal makes sgrun exit with 128 + the signal, without restarts by default") {
  const Finished run = run_sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "crash", "0", "1"});
  CHECK(run.exit_code == 128 + SIGKILL);
  CHECK(run.seconds < 3);
  CHECK(test::contains(run.err, "failed: SIGKILL"));
  CHECK(!test::contains(run.err, "restarting"));
  CHECK(!test::contains(run.out, "attempt 1"));
}

TEST_CASE("with --max-restarts 1 a group whose worker crashed once restarts and finishes") {
  const Finished run =
      run_sgrun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", SG_LAUNCHER_PROBE, "crash", "1", "1"});
  CHECK(run.exit_code == 0);
  CHECK(run.seconds < 3);
  CHECK(test::contains(run.err, "restarting (attempt 1 of 1)"));
  // Both ranks ran the second attempt, and agreed on its port.
  const auto rank0 = lines_of(run.out, 0), rank1 = lines_of(run.out, 1);
  REQUIRE(!rank0.empty());
  REQUIRE(!rank1.empty());
  CHECK(rank0.back().starts_with("attempt 1 port "));
  CHECK(rank0.back() == rank1.back());
  CHECK(rank0.back() != "attempt 1 port 0");
}

TEST_CASE("with restarts used up sgrun exits with the last failure's code") {
  const Finished run =
      run_sgrun({"--nproc-per-node", "2", "--max-restarts", "1", SG_LAUNCHER_PROBE, "crash", "0", "5"});
  CHECK(run.exit_code == 128 + SIGKILL);
  CHECK(test::contains(run.err, "restarting (attempt 1 of 1)"));
  CHECK(!test::contains(run.err, "attempt 2"));
  CHECK(test::contains(run.err, "no restarts left (--max-restarts 1)"));
}

TEST_CASE("sgrun forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to every worker and exits with 128 + the signal") {
  for (const int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    CAPTURE(signal);
    Sgrun sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "wait-for-signal"});
    REQUIRE(sgrun.wait_for_output("] ready", 2, 5));
    sgrun.send(signal);
    const Finished run = sgrun.finish();
    CHECK(run.exit_code == 128 + signal);
    const std::string got = "got signal " + std::to_string(signal);
    CHECK(lines_of(run.out, 0).back() == got);
    CHECK(lines_of(run.out, 1).back() == got);
    CHECK(!test::contains(run.err, "restarting"));
  }
}

TEST_CASE("workers die with sgrun even when sgrun is killed with SIGKILL") {
  Sgrun sgrun({"--nproc-per-node", "2", SG_LAUNCHER_PROBE, "wait-for-signal"});
  REQUIRE(sgrun.wait_for_output("] ready", 2, 5));
  const std::vector<pid_t> workers = children_of(sgrun.pid());
  REQUIRE(workers.size() == 2);
  sgrun.send(SIGKILL);  // no handler runs: the kernel itself must take the workers down
  const auto deadline = seconds_from_now(3);
  while (!(is_gone(workers[0]) && is_gone(workers[1])) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(is_gone(workers[0]));
  CHECK(is_gone(workers[1]));
}

TEST_CASE("workers that ignore SIGTERM get SIGKILL after the grace period") {
  Sgrun sgrun({"--nproc-per-node", "2", "--grace-seconds", "0.3", SG_LAUNCHER_PROBE, "ignore-sigterm"});
  REQUIRE(sgrun.wait_for_output("] ready", 2, 5));
  const auto signalled = Clock::now();
  sgrun.send(SIGTERM);
  const Finished run = sgrun.finish();
  const double seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
  CHECK(run.exit_code == 128 + SIGTERM);
  CHECK(seconds >= 0.3);
  CHECK(seconds < 3);
  CHECK(test::contains(run.err, "sending SIGKILL"));
}

TEST_CASE("sgrun reports bad flags and a program that cannot start") {
  const Finished bad_rank = run_sgrun({"--nnodes", "2", "--node-rank", "2", SG_LAUNCHER_PROBE, "env"});
  CHECK(bad_rank.exit_code == 1);
  CHECK(test::contains(bad_rank.err, "--node-rank 2 is out of range for --nnodes 2"));
  const Finished missing = run_sgrun({"--nproc-per-node", "2", "/nonexistent/worker"});
  CHECK(missing.exit_code == 1);
  CHECK(test::contains(missing.err, "cannot start '/nonexistent/worker'"));
  const Finished unknown = run_sgrun({"--nproc-per-nod", "2", SG_LAUNCHER_PROBE, "env"});
  CHECK(unknown.exit_code == 2);
  CHECK(test::contains(unknown.err, "unknown option --nproc-per-nod"));
}

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

void wait_until(const std::function<bool()>& done, double timeout_seconds) {
  const auto deadline = seconds_from_now(timeout_seconds);
  while (!done() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
