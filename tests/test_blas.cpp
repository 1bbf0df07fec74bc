// Which BLAS kernels run the f32/f64 GEMM (core/cpu/blas.h): the choice by CPU features, and the
// same products whatever is chosen. The probe runs in child processes because OpenBLAS picks its
// kernels once per process, when it is loaded. SG_GEMM_PROBE is tests/gemm_probe's path.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/cpu/blas.h"
#include "dist_harness.h"
#include "helpers.h"

extern char** environ;

using namespace sg;

namespace {

struct ProbeRun {
  int exit_code = -1;
  std::string description;     // what blas_description() said
  std::vector<double> values;  // every product element
};

// Runs gemm_probe with `extra_env` added to (and overriding) this process's environment.
ProbeRun run_probe(const std::vector<std::string>& extra_env) {
  const std::string stem = "test_blas_probe_" + std::to_string(::getpid());
  const std::string values_file = stem + ".bin", output_file = stem + ".txt";
  std::vector<std::string> env_strings = extra_env;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    if (name != "OPENBLAS_CORETYPE" && name != "SG_BLAS") env_strings.push_back(text);
  }
  std::vector<std::string> argv_strings = {SG_GEMM_PROBE, values_file};
  std::vector<char*> argv, envp;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  for (std::string& s : env_strings) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ProbeRun run;
  if (::posix_spawn(&pid, SG_GEMM_PROBE, &actions, nullptr, argv.data(), envp.data()) == 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  std::ifstream output(output_file);
  std::getline(output, run.description);
  std::ifstream values(values_file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(values)), std::istreambuf_iterator<char>());
  run.values.resize(bytes.size() / sizeof(double));
  std::memcpy(run.values.data(), bytes.data(), run.values.size() * sizeof(double));
  std::remove(values_file.c_str());
  std::remove(output_file.c_str());
  return run;
}

}  // namespace

TEST_CASE("OpenBLAS's AVX-512 kernels are asked for exactly when the CPU has the four subsets they use") {
  cpu::CpuFeatures all{true, true, true, true};
  CHECK(cpu::openblas_core_for(all) == "SkylakeX");
  for (bool cpu::CpuFeatures::*feature : {&cpu::CpuFeatures::avx512f, &cpu::CpuFeatures::avx512bw,
                                          &cpu::CpuFeatures::avx512vl, &cpu::CpuFeatures::avx512dq}) {
    cpu::CpuFeatures missing_one = all;
    missing_one.*feature = false;
    CHECK(cpu::openblas_core_for(missing_one).empty());  // OpenBLAS's own choice
  }
  CHECK(cpu::openblas_core_for({}).empty());
}

TEST_CASE("f32 GEMM runs on oneDNN exactly when the CPU has the AVX-512 subsets, unless SG_BLAS names a library") {
  REQUIRE(std::getenv("SG_BLAS") == nullptr);
  const cpu::CpuFeatures all{true, true, true, true};
  CHECK(cpu::f32_gemm_library_for(all) == cpu::F32GemmLibrary::onednn);
  CHECK(cpu::f32_gemm_library_for({true, true, true, false}) == cpu::F32GemmLibrary::openblas);
  CHECK(cpu::f32_gemm_library_for({}) == cpu::F32GemmLibrary::openblas);
  ::setenv("SG_BLAS", "openblas", 1);
  CHECK(cpu::f32_gemm_library_for(all) == cpu::F32GemmLibrary::openblas);
  ::setenv("SG_BLAS", "onednn", 1);
  CHECK(cpu::f32_gemm_library_for({}) == cpu::F32GemmLibrary::onednn);
  ::unsetenv("SG_BLAS");
}

TEST_CASE("the products are the same whatever kernels run them, and the description says which ran") {
  const ProbeRun chosen = run_probe({});
  REQUIRE(chosen.exit_code == 0);
  const size_t half = chosen.values.size() / 2;  // f32 products first, then the same in f64
  REQUIRE(half > 0);
  INFO("default: ", chosen.description);
  CHECK(test::contains(chosen.description, "OpenBLAS"));
  if (!cpu::openblas_core_for(cpu::cpu_features()).empty())
    CHECK(test::contains(chosen.description, "core SkylakeX (chosen by syncgrad"));
  const bool onednn = cpu::f32_gemm_library_for(cpu::cpu_features()) == cpu::F32GemmLibrary::onednn;
  CHECK(test::contains(chosen.description, onednn ? "f32: oneDNN " : "f32 and f64: OpenBLAS"));

  // Every kernel this CPU can run, forced by the user (OpenBLAS's with f32 on OpenBLAS too), and Eigen's product:
  // within f32 rounding (sums of up to 257 products of N(0, 1) values: |error| well under 1e-3) and f64 rounding.
  std::vector<std::vector<std::string>> choices = {
      {"SG_BLAS=eigen"}, {"SG_BLAS=openblas"}, {"SG_BLAS=onednn"}, {"OPENBLAS_CORETYPE=Nehalem", "SG_BLAS=openblas"}};
  if (__builtin_cpu_supports("avx")) choices.push_back({"OPENBLAS_CORETYPE=Sandybridge", "SG_BLAS=openblas"});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    choices.push_back({"OPENBLAS_CORETYPE=Haswell", "SG_BLAS=openblas"});
  for (const auto& env : choices) {
    const ProbeRun other = run_probe(env);
    INFO(env[0], ": ", other.description);
    REQUIRE(other.exit_code == 0);
    REQUIRE(other.values.size() == chosen.values.size());
    if (env[0] == "SG_BLAS=eigen") {
      CHECK(test::contains(other.description, "eigen"));
    } else if (env[0] == "SG_BLAS=openblas") {
      CHECK(test::contains(other.description, "f32 and f64: OpenBLAS"));
    } else if (env[0] == "SG_BLAS=onednn") {
      CHECK(test::contains(other.description, "f32: oneDNN "));
      CHECK(test::contains(other.description, "(SG_BLAS=onednn set by the user); f64: OpenBLAS"));
    } else {
      CHECK(test::contains(other.description, "core " + env[0].substr(env[0].find('=') + 1) + " (OPENBLAS_CORETYPE="));
      // Every core forced here is narrower than SkylakeX, which an AVX-512 CPU could run.
      const std::string best = cpu::openblas_core_for(cpu::cpu_features());
      CHECK(test::contains(other.description, "could run the faster " + best + " core") == !best.empty());
    }
    double f32_error = 0, f64_error = 0;
    for (size_t i = 0; i < chosen.values.size(); ++i) {
      double& error = i < half ? f32_error : f64_error;
      error = std::max(error, std::abs(other.values[i] - chosen.values[i]));
    }
    CHECK(f32_error < 1e-3);
    CHECK(f64_error < 1e-10);
  }
}
