#pragma once
// defines: VirtualRanks — a fixed global batch of V shards ("virtual ranks") trained on any N
//          processes that divide V, with the same steps, bit for bit, whatever N is: a run
//          started on 4 processes and resumed on 2 goes on exactly as it would have on 4.
//
//   dist::VirtualRanks shards(8, dataset, {.batch_size = 16, .shuffle = true, .seed = 1}, *model);
//   for (int64_t step = first_step; step < steps; ++step) {
//     const double loss = shards.gradient(*model, step, [&](const data::Batch& batch) {
//       return loss_of((*model)(batch.input), batch.target);
//     });
//     optimizer.step();                       // the same gradient, to the bit, on every process
//   }
//
// Note [Virtual ranks]
// DDP's all-reduce adds the ranks' gradients in an order that depends on the number of processes
// (the ring's or the tree's), so a run resumed on 2 processes after 4 drifts a few ulps from the
// run that stayed on 4. Here the data set is sharded over V virtual ranks as DistributedSampler
// shards it over V processes — the same batches for any N — and process r trains shards
// r·V/N .. (r+1)·V/N − 1 of each step one after another, each its own forward and backward, its
// gradient copied out flat. An all_gather brings every shard's gradient to every process, which
// adds them in the fixed order 0, 1, ..., V − 1 and divides by V: the gradient of the mean loss
// over the global batch, identical for every N (with the same thread count). The price: V flat
// gradients travel instead of one all-reduced one, with no overlap with backward. A step's batches
// depend only on the epoch and the step within it, so resuming is by step number. Random draws in
// the forward (dropout) come from the default generator set, for each shard, to a stream of that
// shard's own — seed options.seed mixed with the shard's number, at offset step · 2^32 — so a shard
// draws the same masks whichever process trains it; the default generator is put back after each
// step. Buffers a forward updates (BatchNorm's running statistics) stay each process's own, as
// under DDP with broadcast_buffers off: the gradients do not depend on them, an evaluation does.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "data/dataloader.h"
#include "data/distributed_batch_sampler.h"
#include "nn/module.h"

namespace sg::dist {

class VirtualRanks {
public:
  // `virtual_ranks` shards of `dataset`, each batched by options.batch_size (shuffled by
  // options.shuffle and options.seed, as a DistributedSampler; padded to equal shards), on the
  // processes of the default group (or one). Broadcasts `model`'s parameters from process 0, so
  // that every process starts from the same. An sg::Error names both counts when the number of
  // processes does not divide `virtual_ranks`.
  VirtualRanks(int virtual_ranks, std::shared_ptr<const data::Dataset> dataset, const data::DataLoaderOptions& options,
               nn::Module& model);

  int virtual_ranks() const { return static_cast<int>(shards_.size()) * processes_; }
  int64_t steps_per_epoch() const { return shards_.front()->size(); }

  // Sets `model`'s gradients to the gradient of the mean of `loss_of` over the V shards' batches
  // of global step `step` (epoch step / steps_per_epoch(), that epoch's batch step %
  // steps_per_epoch()), Note [Virtual ranks]; returns the mean loss. A collective: every process
  // calls it with the same step.
  double gradient(nn::Module& model, int64_t step, const std::function<Tensor(const data::Batch&)>& loss_of);

private:
  std::shared_ptr<const data::Dataset> dataset_;
  std::vector<std::shared_ptr<const data::DistributedBatchSampler>> shards_;  // this process's, in shard order
  int first_shard_ = 0;                                                       // the number of shards_.front()
  uint64_t seed_ = 0;  // options.seed: mixed into each shard's random stream
  int processes_ = 1;
};

}  // namespace sg::dist
