#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace sg::data {

namespace {
void check_size(int64_t size, const char* name) {
  SG_CHECK(size >= 0, name, ": expected a non-negative size, got ", size);
}
}  // namespace

SequentialSampler::SequentialSampler(int64_t size) : size_(size) { check_size(size, "SequentialSampler"); }

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> order(size_);
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

RandomSampler::RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  check_size(size, "RandomSampler");
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  Generator generator(seed_ + static_cast<uint64_t>(epoch));
  return random_permutation(size_, generator);
}

BatchSampler::BatchSampler(std::shared_ptr<const Sampler> sampler, int64_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)),
      batch_size_(batch_size),
      drop_last_(drop_last) {
  SG_CHECK(sampler_ != nullptr, "BatchSampler: the sampler is null");
  SG_CHECK(batch_size_ >= 1, "BatchSampler: batch_size must be at least 1, got ", batch_size_);
}

int64_t BatchSampler::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<std::vector<int64_t>> BatchSampler::batches(int64_t epoch) const {
  const std::vector<int64_t> order = sampler_->indices(epoch);
  const auto n = static_cast<int64_t>(order.size());
  std::vector<std::vector<int64_t>> result;
  for (int64_t start = 0; start < n; start += batch_size_) {
    const int64_t end = std::min(n, start + batch_size_);
    if (drop_last_ && end - start < batch_size_) break;
    result.emplace_back(order.begin() + start, order.begin() + end);
  }
  return result;
}

std::vector<int64_t> random_permutation(int64_t n, Generator& generator) {
  SG_CHECK(n >= 0, "random_permutation: expected a non-negative size, got ", n);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  if (n < 2) return order;
  // Swap i (from the end down) with a uniform j in [0, i]. Each swap takes 64 random bits, two
  // per Philox block; `bits % (i + 1)` is biased by at most (i + 1) / 2^64, far below anything
  // a data set's size could reveal.
  const int64_t swaps = n - 1;
  const uint64_t first = generator.reserve(static_cast<uint64_t>((swaps + 1) / 2));
  for (int64_t s = 0; s < swaps; ++s) {
    const Generator::Block block = generator.philox(first + static_cast<uint64_t>(s / 2));
    const int word = 2 * static_cast<int>(s % 2);
    const uint64_t bits = (uint64_t(block.word[word]) << 32) | block.word[word + 1];
    const int64_t i = n - 1 - s;
    const auto j = static_cast<int64_t>(bits % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace sg::data
