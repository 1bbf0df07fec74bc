#pragma once
// defines: dist::DataParallelCheck — a worker's half of `sgrun --verify N` (Note [DDP is large-batch
//          SGD] in launch/data_parallel_verification.h). sgrun runs the program twice and tells each
//          run, through the environment, what to do; the Accelerator reads it here, multiplies its
//          loaders' batch size, saves the model's state after prepare() and after the last step, and
//          ends the run there.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace sg::dist {

struct DataParallelCheck {
  int64_t steps = 0;        // SG_VERIFY_STEPS: optimizer steps before the run stops; 0: no check
  int64_t batch_scale = 1;  // SG_VERIFY_BATCH_SCALE: each prepared loader's batch size is multiplied by it
  std::string output;       // SG_VERIFY_OUTPUT: the state after the last step; after prepare(): output + ".initial"
  bool active() const { return steps > 0; }
};

// nullopt-free: an unset SG_VERIFY_STEPS gives an inactive check. Throws naming the variable when a
// value is not a positive whole number or SG_VERIFY_OUTPUT is missing. `lookup` defaults to getenv.
using VariableLookup = std::function<std::optional<std::string>(const std::string& name)>;
DataParallelCheck data_parallel_check_from_environment(const VariableLookup& lookup = {});

}  // namespace sg::dist
