// One rank of the multi-process tests of dist::NonfiniteLossGuard (tests/test_nonfinite_loss.cpp).
// Usage: dist_worker_nonfinite_loss <scenario> <output dir> [scenario arguments]
//   one_rank_diverges <bad rank> <first bad step> <max steps>: every rank observes a loss per step
//     for 10 steps; `bad rank`'s is NaN from `first bad step` on, the others' stay finite. Prints
//     "trained 10 steps" when no rank's guard stopped it.
#include <cmath>
#include <iostream>
#include <limits>
#include <string>

#include "syncgrad.h"
#include "train/accelerator.h"
#include "train/nonfinite_loss.h"
#include "worker_main.h"

using namespace sg;

namespace {

void one_rank_diverges(int bad_rank, int64_t first_bad_step, int max_steps) {
  dist::Accelerator accelerator;
  dist::NonfiniteLossGuard guard(max_steps, "--max-nonfinite-steps", &accelerator);
  for (int64_t step = 1; step <= 10; ++step) {
    const bool bad = accelerator.process_index() == bad_rank && step >= first_bad_step;
    guard.observe(bad ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(step), step);
  }
  std::cout << "trained 10 steps\n";
}

}  // namespace

int main(int argc, char** argv) {
  return test::run_worker(argc, argv, [](const std::string& scenario, const std::string&, const auto& argument) {
    SG_CHECK(scenario == "one_rank_diverges", "unknown scenario '", scenario, "'");
    one_rank_diverges(std::stoi(argument(3)), std::stoll(argument(4)), std::stoi(argument(5)));
  });
}
