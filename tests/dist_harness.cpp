#include "dist_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "launch/launcher.h"

extern char** environ;

namespace sg::test {

namespace {
// ThreadSanitizer runs a program 5 to 15 times slower (scripts/tsan-test.sh). The time limit is
// there to end a hang, not to time the run, so it stretches with the build.
#if defined(__SANITIZE_THREAD__)
constexpr double kSanitizerSlowdown = 4;
#else
constexpr double kSanitizerSlowdown = 1;
#endif
}  // namespace

bool RankResults::all_succeeded() const {
  for (int code : exit_codes)
    if (code != 0) return false;
  return !timed_out;
}

std::string RankResults::summary() const {
  std::ostringstream out;
  if (timed_out) out << "(the time limit killed the ranks still running)\n";
  for (size_t r = 0; r < exit_codes.size(); ++r)
    out << "---- rank " << r << " exited with " << exit_codes[r] << ":\n" << outputs[r];
  return out.str();
}

RankResults run_ranks(const std::string& program, int world, const std::vector<std::string>& args,
                      const std::vector<std::pair<std::string, std::string>>& env, double time_limit_seconds) {
  TempDir logs;
  const int port = dist::find_free_port();
  std::vector<pid_t> pids(static_cast<size_t>(world), -1);
  for (int rank = 0; rank < world; ++rank) {
    std::map<std::string, std::string> variables;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const size_t equals = entry.find('=');
      if (equals != std::string::npos) variables[entry.substr(0, equals)] = entry.substr(equals + 1);
    }
    variables["RANK"] = variables["LOCAL_RANK"] = std::to_string(rank);
    variables["WORLD_SIZE"] = variables["LOCAL_WORLD_SIZE"] = std::to_string(world);
    variables["MASTER_ADDR"] = "127.0.0.1";
    variables["MASTER_PORT"] = std::to_string(port);
    variables["SG_DIST_TIMEOUT"] = "20";
    for (const auto& [name, value] : env) variables[name] = value;
    std::vector<std::string> entries;
    for (const auto& [name, value] : variables) entries.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& entry : entries) envp.push_back(entry.data());
    envp.push_back(nullptr);

    std::vector<std::string> argv_strings{program};
    for (std::string arg : args) {
      for (size_t at = arg.find("{rank}"); at != std::string::npos; at = arg.find("{rank}", at))
        arg.replace(at, 6, std::to_string(rank));
      argv_strings.push_back(std::move(arg));
    }
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);

    const std::string log = logs.path() + "/rank" + std::to_string(rank) + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int spawned =
        posix_spawn(&pids[static_cast<size_t>(rank)], program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      for (pid_t pid : pids)
        if (pid > 0) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
      throw std::runtime_error("run_ranks: cannot start " + program + ": " + std::strerror(spawned));
    }
  }

  RankResults results;
  results.exit_codes.assign(static_cast<size_t>(world), -1);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(time_limit_seconds * kSanitizerSlowdown);
  int running = world;
  while (running > 0) {
    for (int rank = 0; rank < world; ++rank) {
      pid_t& pid = pids[static_cast<size_t>(rank)];
      if (pid <= 0) continue;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) != pid) continue;
      results.exit_codes[static_cast<size_t>(rank)] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid = -1;
      --running;
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      results.timed_out = true;
      for (pid_t& pid : pids)
        if (pid > 0) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0), pid = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int rank = 0; rank < world; ++rank) {
    results.outputs.push_back(read_text(logs.path() + "/rank" + std::to_string(rank) + ".log"));
    // Whatever exit code the test expects of this rank (some expect a failure): a sanitizer
    // report in a worker is a defect, and without halt_on_error it would not even change the code.
    CHECK_MESSAGE(!has_sanitizer_report(results.outputs.back()), "rank ", rank, " of ", program,
                  " printed a sanitizer report:\n", results.outputs.back());
  }
  return results;
}

bool has_sanitizer_report(const std::string& output) {
  // Every sanitizer ends its report with "SUMMARY: <name>Sanitizer: <kind> ...".
  for (const char* name : {"ThreadSanitizer", "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer"})
    if (contains(output, std::string("SUMMARY: ") + name + ":")) return true;
  return false;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "syncgrad-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("TempDir: mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

AppRun run_app(const std::string& program, const std::vector<std::string>& args, int processes,
               double time_limit_seconds) {
  const RankResults results = run_ranks(program, processes, args, {}, time_limit_seconds);
  INFO(results.summary());
  REQUIRE(!results.timed_out);
  return {results.exit_code(0), results.output(0)};
}

void set_snapshot_lr(const std::string& path, double lr) {
  SafetensorsFile file = load_safetensors(path);
  nlohmann::json optimizer = nlohmann::json::parse(file.metadata.at("optimizer"));
  for (nlohmann::json& group : optimizer.at("param_groups")) group.at("hyperparameters")["lr"] = lr;
  file.metadata["optimizer"] = optimizer.dump();
  if (const auto schedule = file.metadata.find("scheduler"); schedule != file.metadata.end()) {
    nlohmann::json state = nlohmann::json::parse(schedule->second);  // the lr it scales on resume
    for (nlohmann::json& base_lr : state.at("base_lrs")) base_lr = lr;
    schedule->second = state.dump();
  }
  save_safetensors(path, file.tensors, file.metadata);
}

}  // namespace sg::test
