#pragma once
// defines: data_parallel_svg — `sgrun --verify`'s report as a picture (--verify-svg): one bar per
//          tensor, the largest difference between the two runs as a fraction of the tensor's update
//          on a log scale, and the line at the tolerance that separates rounding from a real
//          difference.
#include <cstdint>
#include <string>
#include <vector>

#include "launch/data_parallel_verification.h"

namespace sg::dist {

std::string data_parallel_svg(const std::vector<TensorDrift>& drifts, int ranks, int64_t steps,
                              double tolerance = kDataParallelTolerance);

}  // namespace sg::dist
