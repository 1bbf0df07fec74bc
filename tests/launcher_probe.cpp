// launcher_probe: the worker test_launcher.cpp runs under sgrun. What it does is chosen by its
// arguments and its rank (from the environment sgrun sets):
//   env                    print sgrun's variables as KEY=value lines
//   lines                  print lines to stdout and stderr, a '\r'-redrawn line and an unfinished one
//   fail RANK CODE         rank RANK exits with CODE; the others print "ready" and sleep
//   crash RANK ATTEMPTS    prints "attempt A port P"; while SG_RESTART_COUNT < ATTEMPTS, rank RANK
//                          kills itself with SIGKILL and the others sleep; later attempts exit 0
//   wait-for-signal        print "ready", then "got signal N" and exit 0 on SIGTERM / SIGINT /
//                          SIGHUP / SIGQUIT
//   ignore-sigterm         ignore SIGTERM, print "ready" and sleep
// Sleeps are bounded (30 s), so a test that fails cannot leave workers behind for long.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : -1;
}

void sleep_seconds(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

void ready_then_sleep() {
  std::printf("ready\n");
  std::fflush(stdout);
  sleep_seconds(30);
}

extern "C" void report_signal(int signal) {
  char line[32];
  const int length = std::snprintf(line, sizeof line, "got signal %d\n", signal);
  [[maybe_unused]] const ssize_t ignored = ::write(STDOUT_FILENO, line, static_cast<size_t>(length));
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rank = env_int("RANK");
  if (mode == "env") {
    for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                             "MASTER_PORT", "SG_RESTART_COUNT", "SG_MAX_RESTARTS", "TORCHELASTIC_RESTART_COUNT",
                             "TORCHELASTIC_MAX_RESTARTS", "SG_STORE_TOKEN", "SG_PROBE_INHERITED"}) {
      const char* value = std::getenv(name);
      std::printf("%s=%s\n", name, value ? value : "(unset)");
    }
    return 0;
  }
  if (mode == "omp") {
    const char* value = std::getenv("OMP_NUM_THREADS");
    std::printf("OMP_NUM_THREADS=%s\n", value ? value : "(unset)");
    return 0;
  }
  if (mode == "lines") {
    std::printf("first line of rank %d\nsecond line of rank %d\n", rank, rank);
    std::fflush(stdout);
    std::fprintf(stderr, "a warning from rank %d\n", rank);
    std::printf("step 1\rstep 2\r\nunfinished");
    return 0;
  }
  if (mode == "fail" && argc == 4) {
    if (rank != std::atoi(argv[2])) ready_then_sleep();
    sleep_seconds(0.05);
    return std::atoi(argv[3]);
  }
  if (mode == "crash" && argc == 4) {
    const int attempt = env_int("SG_RESTART_COUNT");
    std::printf("attempt %d port %s\n", attempt, std::getenv("MASTER_PORT"));
    std::fflush(stdout);
    if (attempt >= std::atoi(argv[3])) return 0;
    if (rank == std::atoi(argv[2])) ::raise(SIGKILL);
    ready_then_sleep();
    return 0;
  }
  if (mode == "wait-for-signal") {
    for (const int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) std::signal(signal, report_signal);
    ready_then_sleep();
    return 0;
  }
  if (mode == "ignore-sigterm") {
    std::signal(SIGTERM, SIG_IGN);
    ready_then_sleep();
    return 0;
  }
  std::fprintf(stderr, "launcher_probe: unknown mode '%s' (see the comment at the top of launcher_probe.cpp)\n",
               mode.c_str());
  return 2;
}
