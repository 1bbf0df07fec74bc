#include "data/dataset.h"

#include <numeric>

#include "data/sampler.h"

namespace sg::data {

namespace {
// Row `index` of `t` as a view sharing t's storage: t[index] without going through autograd.
Tensor row(const Tensor& t, int64_t index) {
  const TensorImpl& impl = *t.impl();
  const Shape sizes(impl.sizes.begin() + 1, impl.sizes.end());
  const Shape strides(impl.strides.begin() + 1, impl.strides.end());
  return Tensor(std::make_shared<TensorImpl>(impl.storage, impl.storage_offset + index * impl.strides[0], sizes,
                                             strides, impl.dtype));
}

void check_index(int64_t index, int64_t size, const char* name) {
  SG_CHECK(index >= 0 && index < size, name, ": index ", index, " is out of range for ", size, " examples");
}
}  // namespace

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  SG_CHECK(inputs_.defined() && targets_.defined(), "TensorDataset: inputs and targets must be defined");
  SG_CHECK(inputs_.dim() >= 1 && targets_.dim() >= 1,
           "TensorDataset: the first dim indexes examples, so inputs and targets need at least one dim; got ",
           shape_str(inputs_.sizes()), " and ", shape_str(targets_.sizes()));
  SG_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: inputs ", shape_str(inputs_.sizes()), " and targets ",
           shape_str(targets_.sizes()), " differ in their first dim (the example count)");
  size_ = inputs_.size(0);
}

Example TensorDataset::get(int64_t index) const {
  check_index(index, size_, "TensorDataset");
  return {row(inputs_, index), row(targets_, index)};
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)),
      indices_(std::move(indices)) {
  SG_CHECK(dataset_ != nullptr, "Subset: the dataset is null");
  for (int64_t index : indices_) check_index(index, dataset_->size(), "Subset");
}

Example Subset::get(int64_t index) const {
  check_index(index, size(), "Subset");
  return dataset_->get(indices_[index]);
}

Example Subset::get_augmented(int64_t index, Generator& generator) const {
  check_index(index, size(), "Subset");
  return dataset_->get_augmented(indices_[index], generator);
}

Generator example_generator(uint64_t seed, int64_t epoch, int64_t index) {
  // Philox used as a hash: its output words under one key are independent of one another, so
  // keys that differ in any of the three numbers give unrelated streams.
  const auto key_of = [](const Generator::Block& block) { return uint64_t(block.word[0]) << 32 | block.word[1]; };
  const uint64_t pass_key = key_of(philox4x32_10(seed, static_cast<uint64_t>(epoch)));
  return Generator(key_of(philox4x32_10(pass_key, static_cast<uint64_t>(index))));
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths, Generator& generator) {
  SG_CHECK(dataset != nullptr, "random_split: the dataset is null");
  for (int64_t length : lengths) SG_CHECK(length >= 0, "random_split: negative length ", length);
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  SG_CHECK(total == dataset->size(), "random_split: the lengths add up to ", total, " but the dataset has ",
           dataset->size(), " examples");
  const std::vector<int64_t> order = random_permutation(total, generator);
  std::vector<std::shared_ptr<Subset>> subsets;
  auto start = order.begin();
  for (int64_t length : lengths) {
    subsets.push_back(std::make_shared<Subset>(dataset, std::vector<int64_t>(start, start + length)));
    start += length;
  }
  return subsets;
}

}  // namespace sg::data
