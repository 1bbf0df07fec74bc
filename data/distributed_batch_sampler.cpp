#include "data/distributed_batch_sampler.h"

#include <algorithm>

#include "core/error.h"

namespace sg::data {

DistributedBatchSampler::DistributedBatchSampler(std::shared_ptr<const DistributedSampler> sampler, int64_t batch_size,
                                                 bool drop_last, bool even_batches)
    : BatchSampler(sampler, batch_size, drop_last),
      sampler_(std::move(sampler)),
      even_batches_(even_batches) {}

std::vector<std::vector<int64_t>> DistributedBatchSampler::batches(int64_t epoch) const {
  std::vector<std::vector<int64_t>> result = BatchSampler::batches(epoch);
  if (even_batches_) return result;
  for (size_t batch = 0; batch < result.size(); ++batch)
    result[batch].resize(static_cast<size_t>(delivered_rows(sampler_->rank(), static_cast<int64_t>(batch))));
  return result;
}

int64_t DistributedBatchSampler::padded_rows(int64_t batch) const {
  SG_CHECK(batch >= 0 && batch < size(), "DistributedBatchSampler: batch ", batch, " is outside the epoch's ", size(),
           " batches");
  return std::min(batch_size(), sampler_->num_samples() - first_row(batch));
}

int64_t DistributedBatchSampler::first_position(int64_t batch) const {
  SG_CHECK(batch >= 0 && batch <= size(), "DistributedBatchSampler: batch ", batch, " is outside the epoch's ", size(),
           " batches");
  if (batch == size()) return sampler_->first_position() + sampler_->total_size();
  return sampler_->first_position() + first_row(batch) * sampler_->num_replicas();
}

std::shared_ptr<const DistributedBatchSampler> DistributedBatchSampler::starting_at(int64_t first_position) const {
  return std::make_shared<DistributedBatchSampler>(
      std::make_shared<DistributedSampler>(sampler_->starting_at(first_position)), batch_size(), drop_last(),
      even_batches_);
}

int64_t DistributedBatchSampler::example_rows(int rank, int64_t batch) const {
  SG_CHECK(rank >= 0 && rank < sampler_->num_replicas(), "DistributedBatchSampler: invalid rank ", rank, " of ",
           sampler_->num_replicas());
  // Rank r's share rows j = 0, 1, ... sit at positions G + r + j*W; those below N are examples.
  const int64_t world = sampler_->num_replicas();
  const int64_t examples_in_share = std::min(
      sampler_->num_samples(), std::max<int64_t>(0, (sampler_->examples_in_list() - rank + world - 1) / world));
  return std::clamp(examples_in_share - first_row(batch), int64_t{0}, padded_rows(batch));
}

int64_t DistributedBatchSampler::delivered_rows(int rank, int64_t batch) const {
  const int64_t examples = example_rows(rank, batch);
  return even_batches_ || examples == 0 ? padded_rows(batch) : examples;
}

int64_t DistributedBatchSampler::training_rows(int rank, int64_t batch) const {
  return even_batches_ ? padded_rows(batch) : example_rows(rank, batch);
}

}  // namespace sg::data
