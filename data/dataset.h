#pragma once
// defines: Example, Dataset, TensorDataset, Subset, random_split, example_generator — map-style
//          data sets as in torch.utils.data: a size and a get(index).
#include <cstdint>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg::data {

// Note [Per-example random draws]
// A random transform (RandomResizedCrop, RandomHorizontalFlip, ...) draws only from a Generator
// that belongs to one example in one pass: example_generator(seed, epoch, index), from the
// DataLoader's seed, its pass number and the example's index in the data set. The DataLoader
// hands it to Dataset::get_augmented; no other state feeds the draws, so an example's
// augmentation is the same whichever worker thread loads it and in whatever order — the batches
// are identical with num_workers = 0, 1 or 3, and a run resumed with set_epoch(e) sees the
// augmentations an uninterrupted run would. (torch seeds each worker instead, so its
// augmentations change with num_workers.) Data sets without randomness keep the default
// get_augmented, which ignores the generator.

// One training example: what the model reads and what it should predict.
struct Example {
  Tensor input;
  Tensor target;
};

// A data set whose examples are addressed by an index in [0, size()).
// get() is called concurrently from DataLoader worker threads, so it must be safe to call from
// several threads at once (a const method that only reads is) and must not use the OpenMP
// pool (Note [Data code does not use the thread pool] in data/plain_copy.h).
class Dataset {
public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The example as one DataLoader pass sees it: random transforms draw from `generator`, this
  // example's own stream (Note [Per-example random draws]).
  virtual Example get_augmented(int64_t index, Generator& /*generator*/) const { return get(index); }
};

// The generator of example `index` in pass `epoch` of a loader seeded with `seed`: a Philox
// stream whose key hashes the three numbers (Note [Per-example random draws]).
Generator example_generator(uint64_t seed, int64_t epoch, int64_t index);

// Examples are the rows of two tensors: get(i) returns views of inputs[i] and targets[i]
// (they share memory with the tensors given here; the collate function copies them).
class TensorDataset : public Dataset {
public:
  TensorDataset(Tensor inputs, Tensor targets);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

private:
  Tensor inputs_;
  Tensor targets_;
  int64_t size_ = 0;
};

// The examples of `dataset` at `indices`, in that order: Subset::get(i) is dataset.get(indices[i]).
class Subset : public Dataset {
public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  Example get_augmented(int64_t index, Generator& generator) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// Splits `dataset` into disjoint random subsets of the given lengths, which must add up to its
// size (as torch.utils.data.random_split): one permutation drawn from `generator` is cut in order.
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths, Generator& generator);

}  // namespace sg::data
