#pragma once
// defines: DistributedSampler (each rank's share of a data set, torch.utils.data.DistributedSampler),
//          drop_padding (results gathered from every rank without the sampler's padded duplicates,
//          as Accelerate's gather_for_metrics).
//
//   auto sampler = std::make_shared<data::DistributedSampler>(train->size(), world_size, rank);
//   data::DataLoader loader(train, {.batch_size = 32, .sampler = sampler});
//   loader.set_epoch(epoch);  // torch's sampler.set_epoch(epoch): the loader passes it on
//
// Note [DistributedSampler padding]
// Epoch e's order is that of one data set of N indices, the same on every rank: 0 .. N - 1, or a
// permutation drawn from Generator(seed + e) when shuffling (Note [Epochs and shuffling] in
// data/sampler.h; our permutation, not torch's randperm). So that every rank runs the same
// number of steps, the list is made a multiple of the world size W:
//   - default: padded to total_size = ceil(N / W) * W by repeating the list from its start
//     (position p >= N holds list[p % N], also when the padding is longer than N, e.g. N < W);
//   - drop_last: truncated to total_size = floor(N / W) * W (the tail is skipped this epoch).
// Rank r takes positions r, r + W, r + 2W, ... of that list: num_samples = total_size / W each.
// The padded duplicates are exactly the positions >= N, which is what drop_padding relies on.
//
// Note [Dealing the rest of an epoch]
// starting_at(G) gives the sampler of the same epochs whose list begins at position G instead of
// 0: the positions G .. N - 1 (the examples a run stopped at G had not reached) padded, as above,
// to a multiple of W by wrapping (position p >= N holds list[p % N]), and rank r takes G + r,
// G + r + W, ... A run resumed on another number of processes deals the rest of the interrupted
// epoch this way (Note [Resuming on another world size] in train/loader_tracker.h); every formula
// above holds with N - G examples in place of N.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "data/sampler.h"

namespace sg::data {

class DistributedSampler : public Sampler {
public:
  // `dataset_size` indices shared by `num_replicas` ranks; this one is `rank` (0 .. num_replicas - 1).
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);

  int64_t size() const override { return num_samples_; }
  // This rank's share of epoch `epoch` (Note [DistributedSampler padding]).
  std::vector<int64_t> indices(int64_t epoch) const override;

  int64_t num_samples() const { return num_samples_; }                 // per rank and epoch
  int64_t total_size() const { return num_samples_ * num_replicas_; }  // over all ranks, padding included
  int64_t dataset_size() const { return dataset_size_; }
  // The list position this sampler's lists begin at: 0, or G for starting_at(G).
  int64_t first_position() const { return first_position_; }
  // Examples of the data set in the list: dataset_size() - first_position().
  int64_t examples_in_list() const { return dataset_size_ - first_position_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  // The same sampler with lists beginning at position `first_position` (0 .. dataset_size()) of
  // each epoch (Note [Dealing the rest of an epoch]).
  DistributedSampler starting_at(int64_t first_position) const;

private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
  int64_t first_position_ = 0;
};

// Puts per-rank results back in the sampler's list order and drops the padded duplicates.
// rank_results[r] holds rank r's results for its samples first_sample, first_sample + 1, ...
// ([count, ...], the same count, shape and dtype on every rank), e.g. one evaluation batch
// all-gathered; rank r's i-th row belongs to list position (first_sample + i) * W + r. Returns
// the rows in position order, without positions >= dataset_size (Note [DistributedSampler
// padding]). Over a whole epoch (first_sample = 0, count = num_samples) that is exactly one row
// per example of the data set; batch by batch, pass the rows already seen per rank as first_sample.
Tensor drop_padding(const std::vector<Tensor>& rank_results, int64_t dataset_size, int64_t first_sample = 0);

}  // namespace sg::data
