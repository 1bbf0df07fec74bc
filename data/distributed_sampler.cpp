#include "data/distributed_sampler.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/factory.h"
#include "data/plain_copy.h"

namespace sg::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  SG_CHECK(dataset_size >= 0, "DistributedSampler: expected a non-negative dataset size, got ", dataset_size);
  SG_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be at least 1, got ", num_replicas);
  SG_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: invalid rank ", rank,
           ", rank should be in the interval [0, ", num_replicas - 1, "] for num_replicas = ", num_replicas);
  const int64_t world = num_replicas;
  num_samples_ = drop_last ? dataset_size / world : (dataset_size + world - 1) / world;
}

DistributedSampler DistributedSampler::starting_at(int64_t first_position) const {
  SG_CHECK(first_position >= 0 && first_position <= dataset_size_,
           "DistributedSampler: an epoch's list cannot begin at position ", first_position, " of a data set of ",
           dataset_size_, " examples");
  DistributedSampler rest = *this;
  const int64_t examples = dataset_size_ - first_position, world = num_replicas_;
  rest.first_position_ = first_position;
  rest.num_samples_ = drop_last_ ? examples / world : (examples + world - 1) / world;
  return rest;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    Generator generator(seed_ + static_cast<uint64_t>(epoch));
    order = random_permutation(dataset_size_, generator);
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Position p of the padded (or truncated) list is order[p % N]; rank r keeps p = r, r + W, ...
  std::vector<int64_t> share;
  share.reserve(num_samples_);
  for (int64_t position = first_position_ + rank_; position < first_position_ + total_size(); position += num_replicas_)
    share.push_back(order[position % dataset_size_]);
  return share;
}

Tensor drop_padding(const std::vector<Tensor>& rank_results, int64_t dataset_size, int64_t first_sample) {
  SG_CHECK(!rank_results.empty(), "drop_padding: expected the results of at least one rank");
  SG_CHECK(dataset_size >= 0 && first_sample >= 0, "drop_padding: expected a non-negative dataset_size and ",
           "first_sample, got ", dataset_size, " and ", first_sample);
  const Tensor& first = rank_results.front();
  for (size_t r = 0; r < rank_results.size(); ++r) {
    const Tensor& t = rank_results[r];
    SG_CHECK(t.defined() && t.device().is_cpu() && t.dim() >= 1, "drop_padding: rank ", r,
             "'s results must be a CPU tensor with a leading sample dimension");
    SG_CHECK(t.sizes() == first.sizes() && t.dtype() == first.dtype(), "drop_padding: rank ", r, "'s results are ",
             shape_str(t.sizes()), " ", t.dtype(), " but rank 0's are ", shape_str(first.sizes()), " ", first.dtype(),
             "; every rank must contribute the same number of samples");
  }
  const auto world = static_cast<int64_t>(rank_results.size());
  const int64_t count = first.size(0);
  const int64_t kept = std::clamp(dataset_size - first_sample * world, int64_t{0}, count * world);

  Shape shape = first.sizes();
  shape[0] = kept;
  Tensor out = empty(shape, {first.dtype(), Device::cpu()});
  std::vector<Tensor> sources;
  for (const Tensor& t : rank_results) sources.push_back(contiguous_plain(t));
  const Shape row_shape(shape.begin() + 1, shape.end());
  const size_t row_bytes = static_cast<size_t>(numel_of(row_shape)) * first.element_size();
  char* destination = static_cast<char*>(out.raw_data());
  for (int64_t slot = 0; slot < kept; ++slot) {
    const char* source = static_cast<const char*>(sources[slot % world].raw_data());
    std::memcpy(destination + slot * row_bytes, source + (slot / world) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace sg::data
