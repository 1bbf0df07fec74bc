#pragma once
// defines: TensorDrift, compare_data_parallel, data_parallel_report, verify_data_parallel — what
//          `sgrun --verify N` does: train the program for a few steps on N ranks and on one rank
//          with N times the batch, and say, tensor by tensor, whether the two agree.
//
// Note [DDP is large-batch SGD]
// DDP averages the gradients of N ranks that each took B samples; one process taking those N * B
// samples as one batch computes the same average, so the two runs must take the same steps. sgrun
// runs the program twice with the same command line: on N ranks, then on one rank whose
// Accelerator multiplies every loader's batch size by N (train/data_parallel_check.h). The
// DistributedSampler deals one permutation out round-robin, so step s of the N ranks covers
// positions [s N B, (s + 1) N B) of it, exactly the one-rank run's batch s. Each run stops after
// the same number of optimizer steps and saves the model's state; the initial state is saved too.
// What is left is rounding: the two runs add the same numbers in other orders (N partial averages
// against one), and two orders of an f32 sum of n terms differ by at most ~n 2^-24 of the sum of
// their magnitudes. Over a few steps that moves a parameter by ~1e-6 to 1e-4 of how far it moved
// at all (measured on the CNN with SyncBatchNorm: docs/debugging.md). A real difference between
// the runs is of the order of the gradient noise between batches, 1e-2 or more. So a tensor is
// flagged when its largest difference between the runs exceeds `tolerance` (1e-3) of its largest
// change over the steps; the report then lists the usual causes: randomness that depends on the
// rank (dropout, augmentation), BatchNorm's per-rank statistics (SyncBatchNorm averages them), and
// a loss summed over the batch rather than averaged (one rank's sum over N B samples is N times
// the average of N sums over B).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "launch/launch_options.h"

namespace sg::dist {

inline constexpr double kDataParallelTolerance = 1e-3;

struct TensorDrift {
  std::string name;
  double largest_difference = 0;  // max |many ranks - one rank| over the tensor's elements
  double largest_update = 0;      // max |one rank - initial|: how far the steps moved it
  bool differs = false;           // largest_difference > tolerance * largest_update
};

// Every tensor of `initial` (the state both runs started from) compared between the two final
// states. A tensor missing from either final state, or shaped differently, is an error naming it.
std::vector<TensorDrift> compare_data_parallel(const std::map<std::string, Tensor>& initial,
                                               const std::map<std::string, Tensor>& many_ranks,
                                               const std::map<std::string, Tensor>& one_rank,
                                               double tolerance = kDataParallelTolerance);

// The table of every tensor, the verdict, and the usual causes when some tensor differs.
std::string data_parallel_report(const std::vector<TensorDrift>& drifts, int ranks, int64_t steps,
                                 double tolerance = kDataParallelTolerance);

// Runs options.command for `steps` optimizer steps on `ranks` ranks and on one rank with `ranks`
// times the batch (one node, sgrun's other options as given), prints the report (and, when
// `svg_path` is not empty, writes its picture there: launch/data_parallel_picture.h) and returns 0
// when every tensor agrees, 1 when some tensor differs or the runs started from different
// states, or the exit code of a run that failed.
int verify_data_parallel(const LaunchOptions& options, int ranks, int64_t steps, const std::string& svg_path = "");

}  // namespace sg::dist
