#pragma once
// defines: Sampler, SequentialSampler, RandomSampler, BatchSampler, random_permutation — the
//          order in which a DataLoader visits a data set's indices, epoch by epoch.
//
// Note [Epochs and shuffling]
// A sampler's order is a pure function of the epoch number: indices(epoch) never depends on
// what was drawn before in this process. RandomSampler shuffles with a fresh Generator seeded
// with seed + epoch, as PyTorch's DistributedSampler does, so
//   - two processes (or two ranks) with the same seed see the same order every epoch;
//   - a run resumed at epoch e (DataLoader::set_epoch(e)) sees exactly the order an
//     uninterrupted run would have seen;
//   - a DistributedSampler is just another Sampler: it shuffles by seed + epoch, pads and keeps
//     its rank's share, with no other state.
// The DataLoader counts epochs for you (each pass over it is the next epoch), so consecutive
// passes are shuffled differently, as with torch's RandomSampler.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/generator.h"

namespace sg::data {

class Sampler {
public:
  virtual ~Sampler() = default;
  virtual int64_t size() const = 0;  // how many indices one epoch yields
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

// 0, 1, ..., size - 1 every epoch.
class SequentialSampler : public Sampler {
public:
  explicit SequentialSampler(int64_t size);
  int64_t size() const override { return size_; }
  std::vector<int64_t> indices(int64_t epoch) const override;

private:
  int64_t size_;
};

// A permutation of 0 .. size - 1, drawn from Generator(seed + epoch) (Note [Epochs and shuffling]).
class RandomSampler : public Sampler {
public:
  RandomSampler(int64_t size, uint64_t seed);
  int64_t size() const override { return size_; }
  std::vector<int64_t> indices(int64_t epoch) const override;

private:
  int64_t size_;
  uint64_t seed_;
};

// Groups a sampler's indices into batches of `batch_size`, in order. The last batch is smaller
// when the size does not divide evenly, or dropped when `drop_last` (torch's BatchSampler).
// A subclass may reshape the batches (data::DistributedBatchSampler); a DataLoader takes one
// through DataLoaderOptions::batch_sampler, as torch's takes batch_sampler=.
class BatchSampler {
public:
  BatchSampler(std::shared_ptr<const Sampler> sampler, int64_t batch_size, bool drop_last);
  virtual ~BatchSampler() = default;
  virtual int64_t size() const;  // batches per epoch
  virtual std::vector<std::vector<int64_t>> batches(int64_t epoch) const;
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }

private:
  std::shared_ptr<const Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

// A uniformly random permutation of 0 .. n - 1 (Fisher–Yates), drawn from `generator`.
std::vector<int64_t> random_permutation(int64_t n, Generator& generator);

}  // namespace sg::data
