// One rank of tests/test_dist_collectives.cpp. Usage: dist_worker_collectives <scenario>
// Exit codes: 0 all checks passed, 1 a result was wrong (printed), 3 an sg::Error (printed).
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "collective_expectations.h"
#include "syncgrad.h"

using namespace sg;
using namespace sg::test::collectives;

namespace {

// Gloo's AVG divides the exact sum in the tensor's dtype: off by at most half a unit in the last place.
double gloo_avg_tolerance(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 ? 1e-2 : dtype == DType::f32 ? 1e-6 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "never_joins" && std::getenv("RANK") == std::string("1"))
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    dist::init_process_group();
    dist::ProcessGroup& group = dist::default_group();
    if (scenario == "all") {
      check_every_collective(group, Device::cpu(), gloo_avg_tolerance);
    } else if (scenario == "dies") {
      group.barrier()->wait();
      if (group.rank() == 1) std::_Exit(9);  // gone, mid-run, without a goodbye
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "rank0_freezes") {
      group.barrier()->wait();
      if (group.rank() == 0) ::raise(SIGSTOP);  // frozen, as by a debugger or a hung machine; the test kills it
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "late") {
      if (group.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return 0;
      }
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "mismatch") {
      Tensor a = ones({10}), b = ones({4});
      if (group.rank() == 0) group.all_reduce(a)->wait();
      else group.broadcast(b, 0)->wait();
    } else if (scenario == "never_joins") {
      // rank 0 gives up waiting for rank 1 at init
    } else {
      std::cout << "unknown scenario " << scenario << "\n";
      return 2;
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cout << "rank " << dist::get_rank() << ": " << e.what() << "\n";
    return 3;
  }
  return failures == 0 ? 0 : 1;
}
