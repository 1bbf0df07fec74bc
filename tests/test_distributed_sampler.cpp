// DistributedSampler (torch.utils.data.DistributedSampler's padding and striding),
// DistributedBatchSampler (even and uneven batches) and drop_padding (Accelerate's
// gather_for_metrics). No processes: each rank is a sampler object.
#include <algorithm>
#include <numeric>
#include <vector>

#include "data/dataloader.h"
#include "data/distributed_batch_sampler.h"
#include "data/distributed_sampler.h"
#include "helpers.h"

using namespace sg;

namespace {

using Indices = std::vector<int64_t>;

// Python's math.ceil(a / b) for b > 0 (C++ division truncates toward zero instead).
int64_t python_ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

// torch's DistributedSampler.__init__ and __iter__, transcribed: pad by repeating the list (the whole list as
// many times as needed when the padding is longer than it), or truncate; then rank r takes
// list[r : total_size : W]. `order` is the epoch's list before padding.
Indices torch_share(Indices order, int world, int rank, bool drop_last) {
  const auto n = static_cast<int64_t>(order.size());
  const int64_t num_samples =
      (drop_last && n % world != 0) ? python_ceil_div(n - world, world) : python_ceil_div(n, world);
  const int64_t total_size = num_samples * world;
  if (!drop_last) {
    const int64_t padding = total_size - n;
    if (padding <= n) {
      order.insert(order.end(), order.begin(), order.begin() + padding);
    } else {
      const Indices once = order;
      const int64_t repeats = (padding + n - 1) / n;
      Indices repeated;
      for (int64_t i = 0; i < repeats; ++i) repeated.insert(repeated.end(), once.begin(), once.end());
      order.insert(order.end(), repeated.begin(), repeated.begin() + padding);
    }
  } else {
    order.resize(total_size);
  }
  Indices share;
  for (int64_t p = rank; p < total_size; p += world) share.push_back(order[p]);
  return share;
}

// The epoch's padded list seen from outside: rank r's i-th index at position i * W + r.
Indices interleave(const std::vector<Indices>& shares) {
  Indices list(shares.size() * shares.front().size());
  for (size_t r = 0; r < shares.size(); ++r)
    for (size_t i = 0; i < shares[r].size(); ++i) list[i * shares.size() + r] = shares[r][i];
  return list;
}

std::vector<Indices> all_shares(int64_t n, int world, int64_t epoch, bool shuffle, uint64_t seed, bool drop_last) {
  std::vector<Indices> shares;
  for (int rank = 0; rank < world; ++rank)
    shares.push_back(data::DistributedSampler(n, world, rank, shuffle, seed, drop_last).indices(epoch));
  return shares;
}

Indices sorted(Indices v) {
  std::sort(v.begin(), v.end());
  return v;
}

Indices iota_indices(int64_t n) {
  Indices v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// Data set sizes around the interesting edges: divisible, one short, smaller than the world, empty.
struct Case {
  int64_t n;
  int world;
};
const std::vector<Case> kCases = {{12, 4}, {10, 3}, {10, 4}, {7, 1}, {2, 5}, {1, 4}, {3, 8}, {0, 3}, {101, 6}};

}  // namespace

TEST_CASE("DistributedSampler: a small example by hand (no shuffle)") {
  // N = 5, W = 3: total_size 6, list 0 1 2 3 4 | 0.
  CHECK(data::DistributedSampler(5, 3, 0, false).indices(0) == Indices{0, 3});
  CHECK(data::DistributedSampler(5, 3, 1, false).indices(0) == Indices{1, 4});
  CHECK(data::DistributedSampler(5, 3, 2, false).indices(0) == Indices{2, 0});
  // N = 2 < W = 5: the padding (3) is longer than the list, which repeats: 0 1 | 0 1 0.
  CHECK(interleave(all_shares(2, 5, 0, false, 0, false)) == Indices{0, 1, 0, 1, 0});
  // drop_last: total_size floor(5 / 3) * 3 = 3, the tail 3 4 is skipped.
  CHECK(interleave(all_shares(5, 3, 0, false, 0, true)) == Indices{0, 1, 2});
  data::DistributedSampler sampler(5, 3, 1);
  CHECK(sampler.num_samples() == 2);
  CHECK(sampler.size() == 2);
  CHECK(sampler.total_size() == 6);
  CHECK(data::DistributedSampler(5, 3, 1, true, 0, true).total_size() == 3);
}

TEST_CASE("DistributedSampler matches torch's published algorithm applied to the same epoch order") {
  const auto seed = static_cast<uint64_t>(randint(0, 1000, {1}, {DType::i64}, &test::rng()).item<int64_t>());
  for (const Case c : kCases)
    for (const bool drop_last : {false, true})
      for (const bool shuffle : {false, true})
        for (int rank = 0; rank < c.world; ++rank) {
          CAPTURE(c.n);
          CAPTURE(c.world);
          CAPTURE(rank);
          CAPTURE(drop_last);
          CAPTURE(shuffle);
          const int64_t epoch = 2;
          Indices order = iota_indices(c.n);
          if (shuffle) order = data::RandomSampler(c.n, seed).indices(epoch);  // same Generator(seed + epoch)
          data::DistributedSampler sampler(c.n, c.world, rank, shuffle, seed, drop_last);
          const Indices share = sampler.indices(epoch);
          CHECK(share == torch_share(order, c.world, rank, drop_last));
          CHECK(static_cast<int64_t>(share.size()) == sampler.num_samples());
        }
}

TEST_CASE("DistributedSampler: every index is seen exactly once per epoch across ranks, plus the wrapped padding") {
  for (const Case c : kCases) {
    CAPTURE(c.n);
    CAPTURE(c.world);
    const auto shares = all_shares(c.n, c.world, 5, true, 17, false);
    for (const Indices& share : shares) CHECK(share.size() == shares.front().size());  // same steps on every rank
    const Indices list = interleave(shares);
    const int64_t total = (c.n + c.world - 1) / c.world * c.world;
    REQUIRE(static_cast<int64_t>(list.size()) == total);
    CHECK(sorted(Indices(list.begin(), list.begin() + c.n)) == iota_indices(c.n));
    for (int64_t p = c.n; p < total; ++p) CHECK(list[p] == list[p % c.n]);
  }
}

TEST_CASE("DistributedSampler with drop_last: no duplicates, floor(N / W) per rank") {
  for (const Case c : kCases) {
    CAPTURE(c.n);
    CAPTURE(c.world);
    const Indices list = interleave(all_shares(c.n, c.world, 1, true, 3, true));
    CHECK(static_cast<int64_t>(list.size()) == c.n / c.world * c.world);
    const Indices unique = sorted(list);
    CHECK(std::adjacent_find(unique.begin(), unique.end()) == unique.end());
    CHECK(std::all_of(list.begin(), list.end(), [&](int64_t i) { return i >= 0 && i < c.n; }));
  }
}

TEST_CASE("DistributedSampler: the order changes with the epoch and the seed, and all ranks agree on it") {
  const int64_t n = 40;
  const int world = 3;
  const auto epoch0 = all_shares(n, world, 0, true, 7, false);
  const auto epoch1 = all_shares(n, world, 1, true, 7, false);
  CHECK(epoch0 != epoch1);
  CHECK(all_shares(n, world, 0, true, 8, false) != epoch0);
  CHECK(all_shares(n, world, 1, true, 7, false) == epoch1);  // fresh samplers, same epoch: same shares
  // Ranks built independently still cut one common list: its first n positions are a permutation.
  for (const auto& shares : {epoch0, epoch1}) {
    const Indices list = interleave(shares);
    CHECK(sorted(Indices(list.begin(), list.begin() + n)) == iota_indices(n));
  }
  // Without shuffling every epoch is the same.
  CHECK(all_shares(n, world, 0, false, 7, false) == all_shares(n, world, 9, false, 7, false));
}

TEST_CASE("DistributedSampler in a DataLoader: set_epoch picks the epoch, as torch's sampler.set_epoch") {
  auto dataset = std::make_shared<data::TensorDataset>(randn({23, 2}, {}, &test::rng()), arange(23));
  auto sampler = std::make_shared<data::DistributedSampler>(23, 2, 1, true, 4);
  data::DataLoader loader(dataset, {.batch_size = 5, .sampler = sampler});
  CHECK(loader.size() == 3);  // 12 samples on this rank
  for (const int64_t epoch : {3, 0}) {
    loader.set_epoch(epoch);
    Indices targets;
    for (const data::Batch& batch : loader)
      for (const double v : test::values(batch.target)) targets.push_back(static_cast<int64_t>(v));
    CHECK(targets == sampler->indices(epoch));
  }
}

TEST_CASE("DistributedSampler starting_at deals the rest of the epoch's list to the ranks, batches and rows alike") {
  // 23 examples dealt to 3 ranks from list position 8 (15 remaining: 5 each), 9 (14: padded with
  // one duplicate, list[0]) and 23 (none left).
  const int64_t size = 23;
  const Indices list = data::DistributedSampler(size, 1, 0, true, 4).indices(2);
  for (const int64_t start : {int64_t{8}, int64_t{9}, size}) {
    CAPTURE(start);
    Indices dealt, examples;
    for (int rank = 0; rank < 3; ++rank) {
      auto rest = std::make_shared<data::DistributedSampler>(
          data::DistributedSampler(size, 3, rank, true, 4).starting_at(start));
      CHECK(rest->num_samples() == (size - start + 2) / 3);
      const Indices share = rest->indices(2);
      for (size_t row = 0; row < share.size(); ++row)  // rank r's row j is position start + r + 3j
        CHECK(share[row] == list[(start + rank + 3 * static_cast<int64_t>(row)) % size]);
      const data::DistributedBatchSampler batches(rest, 2, false, false);
      CHECK(batches.first_position(0) == start);
      const std::vector<Indices> rank_batches = batches.batches(2);
      for (size_t batch = 0; batch < rank_batches.size(); ++batch)  // uneven: examples only, or a join batch
        if (batches.example_rows(rank, static_cast<int64_t>(batch)) > 0)
          examples.insert(examples.end(), rank_batches[batch].begin(), rank_batches[batch].end());
      dealt.insert(dealt.end(), share.begin(), share.end());
    }
    std::sort(examples.begin(), examples.end());
    Indices expected(list.begin() + start, list.end());
    std::sort(expected.begin(), expected.end());
    CHECK(examples == expected);  // uneven batches: every remaining example once, no padding
    CHECK(dealt.size() - expected.size() < 3);
  }
  CHECK_THROWS_WITH_AS(data::DistributedSampler(size, 3, 0).starting_at(24), doctest::Contains("position 24"), Error);
}

TEST_CASE("DistributedSampler rejects a rank outside the world and bad sizes") {
  CHECK_THROWS_WITH_AS(data::DistributedSampler(10, 2, 2), doctest::Contains("invalid rank 2"), Error);
  CHECK_THROWS_WITH_AS(data::DistributedSampler(10, 2, -1), doctest::Contains("[0, 1]"), Error);
  CHECK_THROWS_WITH_AS(data::DistributedSampler(10, 0, 0), doctest::Contains("num_replicas"), Error);
  CHECK_THROWS_WITH_AS(data::DistributedSampler(-1, 2, 0), doctest::Contains("dataset size"), Error);
}

TEST_CASE("drop_padding: whole-epoch results from every rank give one row per example") {
  for (const Case c : kCases) {
    if (c.n == 0) continue;
    CAPTURE(c.n);
    CAPTURE(c.world);
    // Each rank "evaluates" its share: the result of example i is row i of a random table.
    const Tensor table = randn({c.n, 3}, {}, &test::rng());
    const auto shares = all_shares(c.n, c.world, 2, true, 11, false);
    std::vector<Tensor> gathered;
    for (const Indices& share : shares) {
      std::vector<float> rows;
      for (const int64_t i : share)
        for (int64_t j = 0; j < 3; ++j) rows.push_back(table.data_ptr<float>()[i * 3 + j]);
      gathered.push_back(tensor(rows, {static_cast<int64_t>(share.size()), 3}));
    }
    const Tensor merged = data::drop_padding(gathered, c.n);
    REQUIRE(merged.sizes() == Shape{c.n, 3});
    // Row p of the result is the example at list position p: the epoch's order without padding.
    const Indices list = interleave(shares);
    std::vector<double> expected;
    for (int64_t p = 0; p < c.n; ++p)
      for (int64_t j = 0; j < 3; ++j) expected.push_back(table.data_ptr<float>()[list[p] * 3 + j]);
    CHECK(test::values(merged) == expected);
  }
}

TEST_CASE("drop_padding batch by batch equals drop_padding of the whole epoch") {
  const int64_t n = 23;
  const int world = 4;  // total_size 24: one duplicate, in the last batch
  const int64_t batch = 4;
  const auto shares = all_shares(n, world, 0, true, 5, false);
  std::vector<Tensor> whole;
  for (const Indices& share : shares) whole.push_back(tensor(share, {static_cast<int64_t>(share.size())}));
  std::vector<double> by_batch;
  for (int64_t first = 0; first < static_cast<int64_t>(shares.front().size()); first += batch) {
    const int64_t count = std::min<int64_t>(batch, static_cast<int64_t>(shares.front().size()) - first);
    std::vector<Tensor> gathered;
    for (const Tensor& t : whole) gathered.push_back(t.narrow(0, first, count));  // strided views are fine
    for (const double v : test::values(data::drop_padding(gathered, n, first))) by_batch.push_back(v);
  }
  const std::vector<double> all = test::values(data::drop_padding(whole, n));
  CHECK(by_batch == all);
  Indices seen(all.begin(), all.end());
  CHECK(sorted(seen) == iota_indices(n));
}

TEST_CASE("drop_padding rejects ranks that contributed different shapes") {
  const std::vector<Tensor> gathered = {randn({3, 2}, {}, &test::rng()), randn({2, 2}, {}, &test::rng())};
  CHECK_THROWS_WITH_AS(data::drop_padding(gathered, 5), doctest::Contains("rank 1's results are [2, 2]"), Error);
  CHECK_THROWS_AS(data::drop_padding({}, 5), Error);
}

TEST_CASE("DistributedBatchSampler: uneven batches keep the examples, a rank that ran out gets a join batch") {
  // Note [Uneven batches]'s example: 9 examples, 2 ranks, batches of 2.
  auto rank_batches = [](int rank, bool even) {
    return data::DistributedBatchSampler(std::make_shared<data::DistributedSampler>(9, 2, rank, false), 2, false, even);
  };
  using Batches = std::vector<std::vector<int64_t>>;
  CHECK(rank_batches(0, false).batches(0) == Batches{{0, 2}, {4, 6}, {8}});
  CHECK(rank_batches(1, false).batches(0) == Batches{{1, 3}, {5, 7}, {0}});  // the last: a join batch
  CHECK(rank_batches(1, true).batches(0) == Batches{{1, 3}, {5, 7}, {0}});   // even: the same duplicate
  const data::DistributedBatchSampler uneven = rank_batches(1, false);
  CHECK(uneven.example_rows(0, 2) == 1);
  CHECK(uneven.example_rows(1, 2) == 0);
  CHECK(uneven.delivered_rows(1, 2) == 1);  // handed out whole, but it holds no example
  CHECK(uneven.training_rows(1, 2) == 0);
  CHECK(rank_batches(1, true).training_rows(1, 2) == 1);  // torch trains on the duplicate
}

TEST_CASE("DistributedBatchSampler: every rank's batch b together is the one-process batch b, in order") {
  for (int64_t size : {1, 5, 17, 24, 31})
    for (int world : {1, 2, 3, 4})
      for (int64_t batch_size : {1, 3, 4}) {
        CAPTURE(size);
        CAPTURE(world);
        CAPTURE(batch_size);
        const data::DistributedBatchSampler whole(std::make_shared<data::DistributedSampler>(size, 1, 0, true, 6),
                                                  batch_size * world, false, false);
        std::vector<std::vector<std::vector<int64_t>>> per_rank;
        for (int rank = 0; rank < world; ++rank)
          per_rank.push_back(
              data::DistributedBatchSampler(std::make_shared<data::DistributedSampler>(size, world, rank, true, 6),
                                            batch_size, false, false)
                  .batches(2));
        const auto expected = whole.batches(2);
        REQUIRE(per_rank[0].size() == expected.size());
        for (size_t b = 0; b < expected.size(); ++b) {
          // Interleave the ranks' example rows back into list order (Note [DistributedSampler padding]).
          const data::DistributedBatchSampler sampler(
              std::make_shared<data::DistributedSampler>(size, world, 0, true, 6), batch_size, false, false);
          std::vector<int64_t> together;
          for (int64_t row = 0; row < batch_size; ++row)
            for (int rank = 0; rank < world; ++rank)
              if (row < sampler.example_rows(rank, static_cast<int64_t>(b)))
                together.push_back(per_rank[static_cast<size_t>(rank)][b][static_cast<size_t>(row)]);
          CHECK(together == expected[b]);
        }
      }
}
