#pragma once
// defines: maybe_kill_for_test — the apps' hook for tests that stop a worker at a known point.
//
// With SG_TEST_KILL_AT_STEP=N in the environment, rank SG_TEST_KILL_RANK (default 1) kills itself
// with SIGKILL right after step N of the first attempt (SG_RESTART_COUNT 0), as the OOM killer
// would; the tests of train_gpt and train_resnet run their app under `sgrun --max-restarts 1` with
// it and check that the restarted run resumes from the snapshot and ends as an unkilled one.
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string>

inline void maybe_kill_for_test(int64_t step, int rank) {
  const char* at = std::getenv("SG_TEST_KILL_AT_STEP");
  const char* restarts = std::getenv("SG_RESTART_COUNT");
  const char* kill_rank = std::getenv("SG_TEST_KILL_RANK");
  if (at == nullptr || (restarts != nullptr && std::string(restarts) != "0")) return;
  if (step == std::atoll(at) && rank == (kill_rank != nullptr ? std::atoi(kill_rank) : 1)) std::raise(SIGKILL);
}
