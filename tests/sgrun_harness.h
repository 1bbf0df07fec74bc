#pragma once
// defines: test::Sgrun, test::run_sgrun and the process helpers of the launcher's tests
//          (tests/test_launcher.cpp, tests/test_launcher_recovery.cpp): sgrun, or another program
//          that launches workers, run with its output captured and every wait bounded; the lines a
//          rank wrote; a process's children; whether a process is gone. SG_SGRUN is sgrun's path.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sg::test {

using Clock = std::chrono::steady_clock;

inline Clock::time_point seconds_from_now(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Polls `done` every millisecond until it holds or `timeout_seconds` have passed.
inline void wait_until(const std::function<bool()>& done, double timeout_seconds) {
  const auto deadline = seconds_from_now(timeout_seconds);
  while (!done() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

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

inline Finished run_sgrun(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
  Sgrun sgrun(args, extra_env);
  return sgrun.finish();
}

// The lines of `text` that rank `rank` wrote, without the prefix, in order; rank -1: all lines.
inline std::vector<std::string> lines_of(const std::string& text, int rank) {
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
inline std::vector<pid_t> children_of(pid_t parent) {
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
inline bool is_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace sg::test
