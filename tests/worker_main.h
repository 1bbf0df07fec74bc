#pragma once
// defines: test::run_worker — the main() the workers of the multi-process tests share:
//          `<program> <scenario> <output dir> [scenario arguments]`, OpenMP on one thread, and an
//          exception printed to stderr naming the rank, with exit code 3 (2: no scenario given).
#include <functional>
#include <iostream>
#include <string>

#include "syncgrad.h"

namespace sg::test {

// argument(i) is argv[i]; an sg::Error naming the scenario when the command line is shorter.
using WorkerArgument = std::function<std::string(int i)>;
using WorkerScenarios =
    std::function<void(const std::string& scenario, const std::string& out, const WorkerArgument& argument)>;

inline int run_worker(int argc, char** argv, const WorkerScenarios& scenarios) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <scenario> <output dir> [arguments]\n";
    return 2;
  }
  const std::string scenario = argv[1], out = argv[2];
  const WorkerArgument argument = [&](int i) {
    SG_CHECK(i < argc, "scenario '", scenario, "' needs argument ", i - 2);
    return std::string(argv[i]);
  };
  try {
    set_num_threads(1);
    scenarios(scenario, out, argument);
  } catch (const std::exception& e) {
    std::cerr << "rank " << dist::get_rank() << ": " << e.what() << "\n";
    return 3;
  }
  return 0;
}

}  // namespace sg::test
