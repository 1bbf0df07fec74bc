#pragma once
// defines: DistributedBatchSampler — one rank's batches of a DistributedSampler's epoch, either
//          even (torch's: the padded duplicates included) or uneven (Accelerate's
//          even_batches = false: only the data set's own examples), and, for any rank, which
//          rows of which batch are examples of the data set. dist::Accelerator prepares its
//          loaders with one.
//
// Note [Uneven batches]
// Batch b of rank r holds rows b*B .. (b+1)*B - 1 of the rank's share, that is list positions
// (b*B + i) * W + r of Note [DistributedSampler padding] (B the batch size, W the ranks). With
// even batches that is the batch, duplicates and all. Uneven batches keep only the positions
// below the data set's size N. The padding is the tail of the list, so what is kept is a prefix
// of the batch, and the rows of one batch over all ranks are consecutive positions: every rank's
// batch b together is exactly the one-process batch of B*W examples, in order. A batch left with
// no example (its rank ran out) is handed out whole instead, as a *join batch*: the rank runs
// the step, and with it every collective the others run (DDP's all-reduce, a metric gather), so
// nobody waits for it; the Accelerator gives its loss weight zero and drops its rows from
// gathered metrics. E.g. N = 9, W = 2, B = 2, positions 0..8 plus the duplicate 9 -> 0:
//   rank 0: [0 2] [4 6] [8]           rank 1: [1 3] [5 7] [9 -> 0] (join batch)
// Every rank sees the same number of batches; rank 0 never holds padding.
#include <cstdint>
#include <memory>
#include <vector>

#include "data/distributed_sampler.h"
#include "data/sampler.h"

namespace sg::data {

class DistributedBatchSampler : public BatchSampler {
public:
  DistributedBatchSampler(std::shared_ptr<const DistributedSampler> sampler, int64_t batch_size, bool drop_last,
                          bool even_batches);

  std::vector<std::vector<int64_t>> batches(int64_t epoch) const override;

  const DistributedSampler& sampler() const { return *sampler_; }
  bool even_batches() const { return even_batches_; }
  // Rows of `rank`'s batch `batch` before padding is dropped: the same for every rank.
  int64_t padded_rows(int64_t batch) const;
  // Of those, the rows that are examples of the data set (a prefix of the batch).
  int64_t example_rows(int rank, int64_t batch) const;
  // Rows `rank`'s batch `batch` is handed out with: all of them with even batches, the examples
  // with uneven ones, or all of them again for a join batch (no examples).
  int64_t delivered_rows(int rank, int64_t batch) const;
  // Rows whose loss counts in training: all of them with even batches (torch trains on the
  // duplicates), the examples with uneven ones (none in a join batch).
  int64_t training_rows(int rank, int64_t batch) const;
  // Rows of each rank's share that come before batch `batch`.
  int64_t first_row(int64_t batch) const { return batch * batch_size(); }
  // Positions of the epoch's list (Note [DistributedSampler padding]) that every rank's batches
  // before batch `batch` hold together: they are positions 0 .. first_position(batch) - 1. Once
  // the pass is over (batch == size()) the whole list, total_size(), dropped last batches and all.
  // For a sampler starting_at(G), positions G .. first_position(batch) - 1.
  int64_t first_position(int64_t batch) const;
  // The batches of the same epochs dealt from list position `first_position` on (Note [Dealing
  // the rest of an epoch] in data/distributed_sampler.h), with the same batch size and options.
  std::shared_ptr<const DistributedBatchSampler> starting_at(int64_t first_position) const;

private:
  std::shared_ptr<const DistributedSampler> sampler_;
  bool even_batches_;
};

}  // namespace sg::data
