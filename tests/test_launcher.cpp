// The launcher: LinePrefixer and the option / environment logic in-process, then the real sgrun
// binary running tests/launcher_probe workers (environment, output labels, exit codes, killing
// the group, restarts, signal forwarding). Jobs stopped halfway, dist::spawn's failures and a
// training run that loses a worker are tests/test_launcher_recovery.cpp's. SG_SGRUN and
// SG_LAUNCHER_PROBE are the binaries' paths.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dist_harness.h"
#include "helpers.h"
#include "launch/launcher.h"
#include "launch/line_prefixer.h"
#include "sgrun_harness.h"

using namespace sg;
using namespace sg::test;

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
