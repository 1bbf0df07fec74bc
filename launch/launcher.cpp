#include "launch/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <iterator>
#include <optional>
#include <set>
#include <string_view>

#include "core/error.h"
#include "dist/environment.h"
#include "dist/tcp_store.h"
#include "launch/line_prefixer.h"

extern char** environ;

namespace sg::dist {

namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // our own output is gone (closed pipe): nothing left to tell
    text.remove_prefix(static_cast<size_t>(written));
  }
}

template <typename... Parts>
void say(const Parts&... parts) {
  write_all(STDERR_FILENO, detail::concat("sgrun: ", parts..., "\n"));
}

std::string signal_name(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? detail::concat("SIG", abbreviation) : detail::concat("signal ", signal);
}

// ---- signals reach the poll loop through a pipe (the self-pipe trick) ----

int g_signal_pipe_write = -1;

extern "C" void on_signal(int signal) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t ignored = ::write(g_signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};

// Installs the handlers for the launcher's lifetime and restores the previous ones after it.
class SignalPipe {
public:
  SignalPipe() {
    int fds[2];
    SG_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "sgrun: pipe2 failed: ", std::strerror(errno));
    read_fd_ = fds[0];
    g_signal_pipe_write = fds[1];
    struct sigaction action = {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (size_t i = 0; i < std::size(kHandledSignals); ++i) ::sigaction(kHandledSignals[i], &action, &previous_[i]);
  }
  ~SignalPipe() {
    for (size_t i = 0; i < std::size(kHandledSignals); ++i) ::sigaction(kHandledSignals[i], &previous_[i], nullptr);
    ::close(g_signal_pipe_write);
    g_signal_pipe_write = -1;
    ::close(read_fd_);
  }
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const { return read_fd_; }
  // The signals received since the last call, in order.
  std::vector<int> take() {
    std::vector<int> signals;
    unsigned char buffer[64];
    ssize_t n;
    while ((n = ::read(read_fd_, buffer, sizeof buffer)) > 0) signals.insert(signals.end(), buffer, buffer + n);
    return signals;
  }

private:
  int read_fd_ = -1;
  struct sigaction previous_[std::size(kHandledSignals)];
};

// ---- workers ----

// One of a worker's output pipes, read by the launcher and copied to `destination` with a prefix.
struct Stream {
  int fd = -1;  // the read end; -1 once the stream ended
  int destination;
  LinePrefixer prefixer;
  std::string recent;  // the end of what was copied, for a failure report

  void copy(const std::string& text) {
    write_all(destination, text);
    constexpr size_t kKept = 4096;
    recent += text;
    if (recent.size() > 2 * kKept) recent.erase(0, recent.size() - kKept);
  }

  // Copies what is available now; closes the stream at its end (or a read error we cannot fix).
  void pump() {
    char buffer[65536];
    while (fd >= 0) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        copy(prefixer.feed({buffer, static_cast<size_t>(n)}));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        return;
      } else {
        close();
      }
    }
  }
  // Copies what is available now and closes, even if the write end is still open somewhere.
  void drain_and_close() {
    pump();
    close();
  }
  void close() {
    if (fd < 0) return;
    copy(prefixer.finish());
    ::close(fd);
    fd = -1;
  }
};

struct Worker {
  int local_rank;
  int rank;
  pid_t pid = -1;
  std::optional<int> exit_code;  // once reaped: its code, or 128 + signal
  std::string how;               // once reaped: "exit code 3" / "SIGKILL"
  Stream out;
  Stream err;
};

// Pipes for one worker stream: the write end goes to the worker, the read end (non-blocking)
// stays here. Both are close-on-exec so no worker inherits another worker's pipes, which would
// keep them open past that worker's exit.
std::pair<int, int> make_pipe() {
  int fds[2];
  SG_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "sgrun: pipe2 failed: ", std::strerror(errno));
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return {fds[0], fds[1]};
}

std::vector<std::string> environment_for(const LaunchOptions& options, int local_rank, int port, int restart_count) {
  const auto ours = worker_environment(options, local_rank, port, restart_count);
  std::set<std::string> overridden;
  std::vector<std::string> entries;
  for (const auto& [key, value] : ours) {
    overridden.insert(key);
    entries.push_back(key + "=" + value);
  }
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view text(*entry);
    if (!overridden.contains(std::string(text.substr(0, text.find('='))))) entries.emplace_back(text);
  }
  return entries;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

struct AttemptResult {
  enum class Kind { succeeded, worker_failed, interrupted };
  Kind kind;
  int exit_code;
  LaunchFailure failure;  // unless succeeded
};

// The last `count` lines of `text` (all of it when it has fewer).
std::string last_lines(const std::string& text, int count) {
  size_t begin = text.size();
  if (begin > 0 && text[begin - 1] == '\n') --begin;  // that newline ends the last line
  for (int line = 0; line < count; ++line) {
    const size_t newline = begin == 0 ? std::string::npos : text.rfind('\n', begin - 1);
    if (newline == std::string::npos) return text;
    begin = newline;
  }
  return text.substr(begin + 1);
}

// One attempt: this node's workers, started together, supervised until all of them exited.
class WorkerGroup {
public:
  WorkerGroup(const LaunchOptions& options, int port, int restart_count) : options_(options) {
    const int first_rank = options.node_rank * options.nproc_per_node;
    say("starting ", options.nproc_per_node, " worker(s), ranks ", first_rank, "..",
        first_rank + options.nproc_per_node - 1, " of ", options.nnodes * options.nproc_per_node,
        ", MASTER_ADDR=", options.master_addr, " MASTER_PORT=", port,
        restart_count > 0 ? detail::concat(" (restart ", restart_count, ")") : std::string());
    try {
      for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank)
        spawn(local_rank, port, restart_count);
    } catch (...) {
      signal_all(SIGKILL);
      for (Worker& worker : workers_) ::waitpid(worker.pid, nullptr, 0);
      throw;
    }
  }
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;
  ~WorkerGroup() {
    for (Worker& worker : workers_)
      for (Stream* stream : {&worker.out, &worker.err}) stream->close();
  }

  AttemptResult supervise(SignalPipe& signals);

private:
  void spawn(int local_rank, int port, int restart_count);
  void signal_all(int signal);
  void reap();
  void begin_shutdown(int signal);
  bool all_exited() const {
    return std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.exit_code.has_value(); });
  }

  const LaunchOptions& options_;
  std::vector<Worker> workers_;
  pid_t process_group_ = 0;            // the first worker's pid
  std::optional<int> failure_code_;    // the first failing worker's exit code
  size_t failed_worker_ = 0;           // its index in workers_
  std::optional<int> interrupted_by_;  // the signal the launcher received
  std::optional<Clock::time_point> kill_deadline_;
  bool killed_ = false;
};

// The path execve needs: `name` itself when it holds a '/', else the first executable file of
// that name on PATH (searched here, before fork: the child may only make system calls).
std::string find_program(const std::string& name, int local_rank) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view directories = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = directories.find(':');
    const std::string directory(directories.substr(0, colon));
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    directories.remove_prefix(colon + 1);
  }
  SG_FAIL("sgrun: cannot start '", name, "' for local rank ", local_rank, ": no such program on PATH");
}

// Everything the new worker process does between fork and exec (Note [sgrun's process model]):
// only system calls, since a forked copy of a multithreaded process must not touch locks or the
// heap. On a failed exec the errno goes back through `status_fd`.
[[noreturn]] void become_worker(const char* program, char* const* argv, char* const* envp, int out_fd, int err_fd,
                                int status_fd, pid_t process_group, pid_t launcher, const sigset_t& no_signals) {
  ::setpgid(0, process_group);  // 0 for the first worker: a new group, led by it
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took effect
  const int null_fd = ::open("/dev/null", O_RDONLY);
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  // Default dispositions and nothing blocked, whatever the launcher inherited (e.g. SIGINT
  // ignored when started in the background, SIGHUP under nohup).
  struct sigaction defaults = {};
  defaults.sa_handler = SIG_DFL;
  for (const int signal : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGQUIT, SIGHUP}) ::sigaction(signal, &defaults, nullptr);
  ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
  ::execve(program, argv, envp);
  const int error = errno;
  [[maybe_unused]] const ssize_t ignored = ::write(status_fd, &error, sizeof error);
  ::_exit(127);
}

void WorkerGroup::spawn(int local_rank, int port, int restart_count) {
  const std::string program = find_program(options_.command.front(), local_rank);
  std::vector<std::string> argv_strings = options_.command;
  std::vector<std::string> env_strings = environment_for(options_, local_rank, port, restart_count);
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);
  sigset_t no_signals;
  sigemptyset(&no_signals);

  const auto [out_read, out_write] = make_pipe();
  const auto [err_read, err_write] = make_pipe();
  int status[2];  // close-on-exec: a successful exec closes it, and the read below sees its end
  SG_CHECK(::pipe2(status, O_CLOEXEC) == 0, "sgrun: pipe2 failed: ", std::strerror(errno));
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    become_worker(program.c_str(), argv.data(), envp.data(), out_write, err_write, status[1], process_group_, launcher,
                  no_signals);
  const int fork_error = errno;
  for (const int fd : {out_write, err_write, status[1]}) ::close(fd);
  int exec_error = 0;
  if (pid > 0) {
    ::setpgid(pid, process_group_ == 0 ? pid : process_group_);  // also here: no race with a signal to the group
    ssize_t n;
    while ((n = ::read(status[0], &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {}
    if (n != sizeof exec_error) exec_error = 0;
    if (exec_error != 0) ::waitpid(pid, nullptr, 0);
  }
  ::close(status[0]);
  if (pid < 0 || exec_error != 0) {
    ::close(out_read);
    ::close(err_read);
    SG_FAIL("sgrun: cannot start '", options_.command.front(), "' for local rank ", local_rank, ": ",
            std::strerror(pid < 0 ? fork_error : exec_error));
  }
  if (process_group_ == 0) process_group_ = pid;
  const int rank = options_.node_rank * options_.nproc_per_node + local_rank;
  const std::string prefix = detail::concat("[rank ", rank, "] ");
  workers_.push_back({local_rank,
                      rank,
                      pid,
                      std::nullopt,
                      "",
                      {out_read, STDOUT_FILENO, LinePrefixer(prefix), ""},
                      {err_read, STDERR_FILENO, LinePrefixer(prefix), ""}});
}

// The group exists while any worker is unreaped (a zombie keeps its process group), so the
// group id cannot have been reused by an unrelated process.
void WorkerGroup::signal_all(int signal) {
  if (process_group_ != 0 && !all_exited()) ::kill(-process_group_, signal);
}

void WorkerGroup::begin_shutdown(int signal) {
  signal_all(signal);
  if (!kill_deadline_)
    kill_deadline_ = Clock::now() +
                     std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.grace_seconds));
}

void WorkerGroup::reap() {
  for (Worker& worker : workers_) {
    if (worker.exit_code) continue;
    int status = 0;
    if (::waitpid(worker.pid, &status, WNOHANG) != worker.pid) continue;
    if (WIFSIGNALED(status)) {
      worker.exit_code = 128 + WTERMSIG(status);
      worker.how = signal_name(WTERMSIG(status));
    } else {
      worker.exit_code = WEXITSTATUS(status);
      worker.how = detail::concat("exit code ", *worker.exit_code);
    }
    if (*worker.exit_code == 0 || failure_code_ || interrupted_by_) continue;
    failure_code_ = worker.exit_code;
    failed_worker_ = static_cast<size_t>(&worker - workers_.data());
    say("worker rank ", worker.rank, " (local rank ", worker.local_rank, ", pid ", worker.pid, ") failed: ", worker.how,
        "; stopping the other workers");
    begin_shutdown(SIGTERM);
  }
}

AttemptResult WorkerGroup::supervise(SignalPipe& signals) {
  while (!all_exited()) {
    std::vector<pollfd> polled = {{signals.fd(), POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Worker& worker : workers_)
      for (Stream* stream : {&worker.out, &worker.err})
        if (stream->fd >= 0) {
          polled.push_back({stream->fd, POLLIN, 0});
          streams.push_back(stream);
        }
    int timeout_ms = -1;
    if (kill_deadline_ && !killed_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_deadline_ - Clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    if (::poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR)
      SG_FAIL("sgrun: poll failed: ", std::strerror(errno));

    for (const int signal : signals.take()) {
      // A repeated signal changes nothing: one event often arrives twice (`timeout` signals its
      // child and then its own process group), and the grace period already bounds the wait.
      if (signal == SIGCHLD || interrupted_by_) continue;  // SIGCHLD: reaped below
      interrupted_by_ = signal;
      say("got ", signal_name(signal), "; forwarding it to the workers");
      begin_shutdown(signal);
    }
    for (size_t i = 0; i < streams.size(); ++i)
      if (polled[i + 1].revents != 0) streams[i]->pump();
    reap();
    if (kill_deadline_ && !killed_ && Clock::now() >= *kill_deadline_ && !all_exited()) {
      say("workers still running ", options_.grace_seconds, " s after being asked to stop; sending SIGKILL");
      signal_all(SIGKILL);
      killed_ = true;
    }
  }
  // Every worker has exited, so what it wrote is already in its pipes: take it, without waiting
  // for processes a worker may have left behind holding the pipes open.
  for (Worker& worker : workers_)
    for (Stream* stream : {&worker.out, &worker.err}) stream->drain_and_close();

  if (interrupted_by_)
    return {AttemptResult::Kind::interrupted, 128 + *interrupted_by_, {-1, signal_name(*interrupted_by_), ""}};
  if (failure_code_) {
    const Worker& failed = workers_[failed_worker_];
    return {AttemptResult::Kind::worker_failed,
            *failure_code_,
            {failed.rank, failed.how, last_lines(failed.err.recent, 10)}};
  }
  return {AttemptResult::Kind::succeeded, 0, {}};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> worker_environment(const LaunchOptions& options, int local_rank,
                                                                    int master_port, int restart_count) {
  SG_CHECK(local_rank >= 0 && local_rank < options.nproc_per_node, "sgrun: local rank ", local_rank,
           " is out of range for --nproc-per-node ", options.nproc_per_node);
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> environment = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(options.nnodes * options.nproc_per_node)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"SG_RESTART_COUNT", std::to_string(restart_count)},
      {"SG_MAX_RESTARTS", std::to_string(options.max_restarts)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options.max_restarts)}};
  if (!options.store_token.empty()) environment.emplace_back("SG_STORE_TOKEN", options.store_token);
  environment.insert(environment.end(), options.extra_environment.begin(), options.extra_environment.end());
  return environment;
}

int find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SG_CHECK(fd >= 0, "sgrun: cannot create a socket to find a free port: ", std::strerror(errno));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  SG_CHECK(ok, "sgrun: cannot find a free port: ", std::strerror(error));
  return ntohs(address.sin_port);
}

namespace {
std::string random_store_token() {
  unsigned char bytes[16];
  SG_CHECK(::getrandom(bytes, sizeof bytes, 0) == static_cast<ssize_t>(sizeof bytes),
           "sgrun: cannot draw a random store token: ", std::strerror(errno));
  std::string token;
  for (const unsigned char byte : bytes) token += detail::concat(std::hex, std::setw(2), std::setfill('0'), int{byte});
  return token;
}
}  // namespace

int launch(const LaunchOptions& given, LaunchFailure* failure) {
  check_launch_options(given);
  LaunchOptions options = given;
  // Note [The store faces the network] in dist/tcp_store.h: one node makes its own token; the
  // nodes of a multi-node job cannot agree on one without a channel, so the user gives it.
  if (options.store_token.empty()) options.store_token = store_token_from_environment();
  if (options.store_token.empty() && options.nnodes == 1) options.store_token = random_store_token();
  if (options.store_token.empty())
    say("SG_STORE_TOKEN is not set: the rendezvous store will accept any client that reaches ", options.master_addr,
        ":", options.master_port, "; set the same SG_STORE_TOKEN on every node to require it");
  SignalPipe signals;
  for (int restart_count = 0;; ++restart_count) {
    const int port = options.standalone ? find_free_port() : options.master_port;
    WorkerGroup group(options, port, restart_count);
    const AttemptResult result = group.supervise(signals);
    if (failure != nullptr && result.kind != AttemptResult::Kind::succeeded) *failure = result.failure;
    if (result.kind != AttemptResult::Kind::worker_failed) return result.exit_code;
    if (restart_count == options.max_restarts) {
      say("no restarts left (--max-restarts ", options.max_restarts, "); exiting with code ", result.exit_code);
      return result.exit_code;
    }
    say("restarting (attempt ", restart_count + 1, " of ", options.max_restarts, ")");
  }
}

}  // namespace sg::dist
