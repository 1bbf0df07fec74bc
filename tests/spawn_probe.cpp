// A program that calls dist::spawn, for tests/test_launcher_recovery.cpp. Usage: spawn_probe MODE
//   allreduce  3 processes all-reduce their rank + 1; each prints its rank and the sum (6)
//   fail       rank 1 of 3 throws; the others wait to be stopped
// The parent prints "spawn returned" after a success, or the sg::Error and exits 4.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "syncgrad.h"

using namespace sg;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    dist::spawn(
        [&](int rank) {
          if (mode == "allreduce") {
            dist::init_process_group();
            Tensor value = full({1}, static_cast<double>(rank + 1));
            dist::all_reduce(value);
            std::printf("rank %d of %d: sum %g\n", rank, dist::get_world_size(), value.item<double>());
            dist::destroy_process_group();
          } else if (mode == "fail") {
            if (rank == 1) throw Error("rank 1 gives up on purpose");
            std::this_thread::sleep_for(std::chrono::seconds(60));
          }
        },
        3, {.grace_seconds = 1.0});
    std::printf("spawn returned\n");
  } catch (const Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 4;
  }
  return 0;
}
