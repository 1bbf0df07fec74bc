#pragma once
// defines: test::check_forward_backward_match_cpu — an op's output and its gradients on the GPU
//          against the same op's on the CPU.
#include <functional>

#include "cuda_compare.h"

namespace sg::test {

// Runs `op` on `inputs` (CPU tensors; undefined ones stay undefined) and on GPU copies of them,
// every defined input a leaf that requires grad; backpropagates one random output gradient
// through both; checks the outputs within `output_tolerance` and each input's gradient within
// `gradient_tolerance` (-1: tolerance_for the dtype, as check_matches_cpu).
void check_forward_backward_match_cpu(const std::function<Tensor(const TensorList&)>& op, const TensorList& inputs,
                                      double output_tolerance = -1, double gradient_tolerance = -1);

}  // namespace sg::test
