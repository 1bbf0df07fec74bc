// The data package: data sets, samplers, the DataLoader (with and without workers), transforms,
// the IDX reader and Fashion-MNIST.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ranges>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

// 50 examples: inputs f32 [50, 3, 2] from the seeded generator, targets i64 0..49.
std::shared_ptr<data::TensorDataset> small_dataset() {
  return std::make_shared<data::TensorDataset>(randn({50, 3, 2}, {}, &test::rng()), arange(50));
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> iota_vector(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<int64_t> as_int64(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : test::values(t)) out.push_back(static_cast<int64_t>(v));
  return out;
}

// Every batch of one pass, as (input values, target values).
std::vector<std::pair<std::vector<double>, std::vector<double>>> collect(data::DataLoader& loader) {
  std::vector<std::pair<std::vector<double>, std::vector<double>>> batches;
  for (const data::Batch& batch : loader) batches.emplace_back(test::values(batch.input), test::values(batch.target));
  return batches;
}

// Example i is {f32 scalar i, i64 scalar i}; get() sleeps a little (longer for some indices, so
// workers finish out of order), counts its calls, and throws at `fail_at`.
class ProbeDataset : public data::Dataset {
public:
  ProbeDataset(int64_t size, std::chrono::microseconds delay, int64_t fail_at = -1)
      : size_(size),
        delay_(delay),
        fail_at_(fail_at) {}
  int64_t size() const override { return size_; }
  data::Example get(int64_t index) const override {
    ++calls;
    std::this_thread::sleep_for(delay_ * (1 + (index * 7) % 3));
    SG_CHECK(index != fail_at_, "ProbeDataset: bad example ", index);
    return {scalar_tensor(static_cast<double>(index)), scalar_tensor(static_cast<double>(index), {DType::i64})};
  }
  mutable std::atomic<int64_t> calls = 0;

private:
  int64_t size_;
  std::chrono::microseconds delay_;
  int64_t fail_at_;
};

// A fresh directory under the system temp dir, removed with its files at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("syncgrad_test_data_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// The bytes of an IDX file: the magic number, the big-endian sizes, the payload.
std::string idx_bytes(uint32_t magic, const std::vector<uint32_t>& sizes, const std::vector<uint8_t>& payload) {
  std::string bytes;
  auto put32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((v >> shift) & 0xFF));
  };
  put32(magic);
  for (uint32_t s : sizes) put32(s);
  bytes.append(payload.begin(), payload.end());
  return bytes;
}

void write_raw(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

doctest::Contains contains(const std::string& text) { return doctest::Contains(text.c_str()); }

std::vector<uint8_t> random_bytes(size_t n) {
  const Tensor t = randint(0, 256, {static_cast<int64_t>(n)}, {DType::u8, Device::cpu()}, &test::rng());
  const uint8_t* data = t.data_ptr<uint8_t>();
  return std::vector<uint8_t>(data, data + n);
}

}  // namespace

// ---- data sets ----

TEST_CASE("TensorDataset returns views of row i of the inputs and the targets") {
  auto dataset = small_dataset();
  CHECK(dataset->size() == 50);
  const data::Example example = dataset->get(7);
  CHECK(example.input.sizes() == Shape{3, 2});
  CHECK(example.target.sizes() == Shape{});
  CHECK(example.target.item<int64_t>() == 7);
  CHECK(test::max_abs_diff(example.input, dataset->inputs().select(0, 7)) == 0.0);
  CHECK(example.input.storage() == dataset->inputs().storage());  // a view, no copy
}

TEST_CASE("TensorDataset rejects a mismatched example count and an index out of range") {
  CHECK_THROWS_WITH_AS(data::TensorDataset(zeros({4, 2}), zeros({5})), doctest::Contains("[4, 2]"), Error);
  auto dataset = small_dataset();
  CHECK_THROWS_WITH_AS(dataset->get(50), doctest::Contains("index 50 is out of range for 50"), Error);
  CHECK_THROWS_AS(dataset->get(-1), Error);
}

TEST_CASE("Subset reads the examples at its indices in their order") {
  auto dataset = small_dataset();
  data::Subset subset(dataset, {9, 2, 9});
  CHECK(subset.size() == 3);
  CHECK(subset.get(0).target.item<int64_t>() == 9);
  CHECK(subset.get(1).target.item<int64_t>() == 2);
  CHECK(subset.get(2).target.item<int64_t>() == 9);
  CHECK_THROWS_AS(data::Subset(dataset, {50}), Error);
}

TEST_CASE("random_split gives disjoint subsets of the asked lengths that cover the data set, by seed") {
  auto dataset = small_dataset();
  Generator generator(5);
  const auto parts = data::random_split(dataset, {30, 15, 5}, generator);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0]->size() == 30);
  CHECK(parts[1]->size() == 15);
  CHECK(parts[2]->size() == 5);
  std::vector<int64_t> all;
  for (const auto& part : parts) all.insert(all.end(), part->indices().begin(), part->indices().end());
  CHECK(sorted(all) == iota_vector(50));
  CHECK(all != iota_vector(50));  // shuffled, not cut in order

  Generator same_seed(5);
  CHECK(data::random_split(dataset, {30, 15, 5}, same_seed)[0]->indices() == parts[0]->indices());
  Generator other_seed(6);
  CHECK(data::random_split(dataset, {30, 15, 5}, other_seed)[0]->indices() != parts[0]->indices());
  CHECK_THROWS_WITH_AS(data::random_split(dataset, {30, 10}, generator), doctest::Contains("add up to 40"), Error);
}

// ---- samplers ----

TEST_CASE("SequentialSampler yields 0 to n - 1 every epoch") {
  data::SequentialSampler sampler(6);
  CHECK(sampler.size() == 6);
  CHECK(sampler.indices(0) == iota_vector(6));
  CHECK(sampler.indices(3) == iota_vector(6));
}

TEST_CASE("RandomSampler yields a permutation fixed by seed and epoch, different across epochs and seeds") {
  data::RandomSampler sampler(100, 42);
  const auto epoch0 = sampler.indices(0);
  CHECK(sorted(epoch0) == iota_vector(100));
  CHECK(epoch0 != iota_vector(100));
  CHECK(data::RandomSampler(100, 42).indices(0) == epoch0);  // a new sampler, same seed
  const auto epoch1 = sampler.indices(1);
  CHECK(sorted(epoch1) == iota_vector(100));
  CHECK(epoch1 != epoch0);
  CHECK(sampler.indices(0) == epoch0);  // asking for epoch 1 first changes nothing
  CHECK(data::RandomSampler(100, 43).indices(0) != epoch0);
}

TEST_CASE("random_permutation draws each ordering of 3 items about equally often") {
  // 6000 draws, 1000 expected per ordering; the binomial standard deviation is ~29, so 150 is
  // over 5 sigma, while a biased shuffle (e.g. j drawn from [0, i) instead of [0, i]) misses
  // some orderings entirely.
  Generator generator(7);
  std::map<std::vector<int64_t>, int> counts;
  for (int draw = 0; draw < 6000; ++draw) ++counts[data::random_permutation(3, generator)];
  REQUIRE(counts.size() == 6);
  for (const auto& [order, count] : counts) CHECK(std::abs(count - 1000) < 150);
}

TEST_CASE("BatchSampler keeps a smaller last batch unless drop_last") {
  auto sampler = std::make_shared<data::SequentialSampler>(10);
  data::BatchSampler keep(sampler, 3, false);
  CHECK(keep.size() == 4);
  CHECK(keep.batches(0) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  data::BatchSampler drop(sampler, 3, true);
  CHECK(drop.size() == 3);
  CHECK(drop.batches(0) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});

  for (int64_t n : {0, 1, 5, 12, 13}) {
    for (int64_t batch_size : {1, 4, 12, 20}) {
      for (bool drop_last : {false, true}) {
        data::BatchSampler batches(std::make_shared<data::SequentialSampler>(n), batch_size, drop_last);
        CHECK(batches.size() == static_cast<int64_t>(batches.batches(0).size()));
      }
    }
  }
  CHECK_THROWS_AS(data::BatchSampler(sampler, 0, false), Error);
}

// ---- collate and DataLoader ----

TEST_CASE("default_collate stacks inputs and targets into [B, ...] keeping dtypes and values") {
  const Tensor a = randn({2, 3}, {}, &test::rng());
  const Tensor b = randn({3, 2}, {}, &test::rng()).t();  // not contiguous
  const data::Batch batch =
      data::default_collate({{a, scalar_tensor(4, {DType::i64})}, {b, scalar_tensor(1, {DType::i64})}});
  CHECK(batch.input.sizes() == Shape{2, 2, 3});
  CHECK(batch.input.dtype() == DType::f32);
  CHECK(batch.target.sizes() == Shape{2});
  CHECK(batch.target.dtype() == DType::i64);
  CHECK(test::max_abs_diff(batch.input.select(0, 0), a) == 0.0);
  CHECK(test::max_abs_diff(batch.input.select(0, 1), b) == 0.0);
  CHECK(as_int64(batch.target) == std::vector<int64_t>{4, 1});
}

TEST_CASE("default_collate names the example whose shape or dtype differs") {
  const Tensor target = scalar_tensor(0, {DType::i64});
  CHECK_THROWS_WITH_AS(data::default_collate({{zeros({2}), target}, {zeros({3}), target}}),
                       doctest::Contains("example 1's input is [3] f32 but example 0's is [2] f32"), Error);
  CHECK_THROWS_WITH_AS(data::default_collate({{zeros({2}), target}, {zeros({2}), scalar_tensor(0)}}),
                       doctest::Contains("example 1's target"), Error);
}

// Range-for is the usual use, but std::ranges algorithms work too.
static_assert(std::input_iterator<data::DataLoader::Iterator>);
static_assert(std::ranges::input_range<data::DataLoader>);

TEST_CASE("DataLoader batches hold the sampled examples and size counts them") {
  auto dataset = small_dataset();
  data::DataLoader loader(dataset, {.batch_size = 16});
  CHECK(loader.size() == 4);
  int64_t seen = 0;
  for (const data::Batch& batch : loader) {
    const int64_t rows = batch.input.size(0);
    CHECK(batch.input.sizes() == Shape{rows, 3, 2});
    const auto targets = as_int64(batch.target);
    for (int64_t r = 0; r < rows; ++r) {
      CHECK(targets[r] == seen + r);
      CHECK(test::max_abs_diff(batch.input.select(0, r), dataset->inputs().select(0, seen + r)) == 0.0);
    }
    seen += rows;
  }
  CHECK(seen == 50);
  CHECK(data::DataLoader(dataset, {.batch_size = 16, .drop_last = true}).size() == 3);
}

TEST_CASE("DataLoader yields the same batches in the same order with 0, 1 and 3 workers") {
  auto dataset = std::make_shared<ProbeDataset>(45, std::chrono::microseconds(50));
  std::vector<std::vector<std::pair<std::vector<double>, std::vector<double>>>> runs;
  for (int workers : {0, 1, 3}) {
    data::DataLoader loader(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 3});
    runs.push_back(collect(loader));
  }
  REQUIRE(runs[0].size() == 12);
  CHECK(runs[0].back().second.size() == 1);  // 45 = 11 * 4 + 1
  CHECK(runs[1] == runs[0]);
  CHECK(runs[2] == runs[0]);
}

TEST_CASE("pin_memory leaves the batches' values and order as they are, with and without workers") {
  // With a GPU the batches are copies in page-locked memory; without one the option is ignored.
  // Either way they are CPU tensors holding the same examples.
  auto dataset = std::make_shared<ProbeDataset>(23, std::chrono::microseconds(0));
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    data::DataLoader plain(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 5});
    data::DataLoader pinned(dataset,
                            {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 5, .pin_memory = true});
    CHECK(collect(pinned) == collect(plain));
    for (const data::Batch& batch : pinned) {
      CHECK(batch.input.device() == Device::cpu());
      CHECK(batch.target.device() == Device::cpu());
    }
  }
}

TEST_CASE("a DataLoader asked for batches on a GPU that is not there fails at construction, naming the reason") {
  if (cuda::is_available()) return;  // batches on a real GPU: tests/cuda/test_cuda_training.cpp
  CHECK_THROWS_WITH_AS(data::DataLoader(small_dataset(), {.device = Device::cuda(0)}),
                       contains(cuda::unavailable_reason()), Error);
}

TEST_CASE("a DataLoader refuses a negative number of workers, or more threads than kMaxLoaderWorkers") {
  CHECK_THROWS_WITH_AS(data::DataLoader(small_dataset(), {.num_workers = -1}),
                       "DataLoader: num_workers must lie in [0, 1024] (threads), got -1", Error);
  CHECK_THROWS_WITH_AS(data::DataLoader(small_dataset(), {.num_workers = 1000000}),
                       "DataLoader: num_workers must lie in [0, 1024] (threads), got 1000000", Error);
}

TEST_CASE("a shuffled DataLoader is reproducible by seed, reshuffles each epoch and replays one by set_epoch") {
  auto dataset = small_dataset();
  const data::DataLoaderOptions options{.batch_size = 10, .shuffle = true, .seed = 11};
  data::DataLoader loader(dataset, options);
  const auto epoch0 = collect(loader);
  const auto epoch1 = collect(loader);
  CHECK(loader.epoch() == 2);
  CHECK(epoch1 != epoch0);

  data::DataLoader same(dataset, options);
  CHECK(collect(same) == epoch0);
  same.set_epoch(1);
  CHECK(collect(same) == epoch1);

  data::DataLoaderOptions other_seed = options;
  other_seed.seed = 12;
  data::DataLoader other(dataset, other_seed);
  CHECK(collect(other) != epoch0);
}

TEST_CASE("DataLoader uses a given sampler and refuses it together with shuffle") {
  auto dataset = small_dataset();
  auto sampler = std::make_shared<data::RandomSampler>(dataset->size(), 9);
  data::DataLoader loader(dataset, {.batch_size = 50, .sampler = sampler});
  std::vector<int64_t> targets;
  for (const data::Batch& batch : loader) targets = as_int64(batch.target);
  CHECK(targets == sampler->indices(0));
  CHECK_THROWS_WITH_AS(data::DataLoader(dataset, {.shuffle = true, .sampler = sampler}),
                       doctest::Contains("mutually exclusive with shuffle"), Error);
}

TEST_CASE("skip_first_batches: the next pass starts at that batch of the same order, the one after is whole") {
  auto dataset = small_dataset();
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    const data::DataLoaderOptions options{.batch_size = 7, .shuffle = true, .num_workers = workers, .seed = 4};
    data::DataLoader whole(dataset, options), skipping(dataset, options);
    std::vector<std::vector<int64_t>> expected;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Batch& batch : whole) expected.push_back(as_int64(batch.target));
    skipping.skip_first_batches(3);
    std::vector<std::vector<int64_t>> seen;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Batch& batch : skipping) seen.push_back(as_int64(batch.target));
    expected.erase(expected.begin(), expected.begin() + 3);
    CHECK(seen == expected);
  }
  data::DataLoader loader(dataset, {.batch_size = 7});
  CHECK_THROWS_WITH_AS(loader.skip_first_batches(loader.size() + 1), doctest::Contains("skip_first_batches"), Error);
  auto batch_sampler =
      std::make_shared<data::BatchSampler>(std::make_shared<data::SequentialSampler>(dataset->size()), 5, false);
  CHECK(data::DataLoader(dataset, {.batch_sampler = batch_sampler}).size() == batch_sampler->size());
  CHECK_THROWS_WITH_AS(data::DataLoader(dataset, {.drop_last = true, .batch_sampler = batch_sampler}),
                       doctest::Contains("batch_sampler option is mutually exclusive"), Error);
}

TEST_CASE("a custom collate receives each batch's examples in sampler order") {
  auto dataset = small_dataset();
  std::vector<std::vector<int64_t>> seen;
  std::mutex mutex;
  data::Collate record = [&](const std::vector<data::Example>& examples) {
    std::vector<int64_t> targets;
    for (const data::Example& example : examples) targets.push_back(example.target.item<int64_t>());
    std::lock_guard lock(mutex);
    seen.push_back(targets);
    return data::default_collate(examples);
  };
  data::DataLoader loader(dataset, {.batch_size = 20, .num_workers = 2, .collate = record});
  for (const data::Batch& batch : loader) CHECK(batch.input.size(1) == 3);
  std::sort(seen.begin(), seen.end());  // workers may run the collate in any order
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == iota_vector(20));
  CHECK(seen[2].size() == 10);
}

TEST_CASE("DataLoader workers run with a one-thread OpenMP pool") {
  auto dataset = small_dataset();
  std::atomic<int> most_threads = 0;
  data::Collate probe = [&](const std::vector<data::Example>& examples) {
    most_threads = std::max(most_threads.load(), get_num_threads());
    return data::default_collate(examples);
  };
  data::DataLoader loader(dataset, {.batch_size = 5, .num_workers = 2, .collate = probe});
  for (const data::Batch& batch : loader) CHECK(batch.input.defined());
  CHECK(most_threads == 1);
}

TEST_CASE("breaking out of a loop with workers stops and joins them promptly, after bounded prefetching") {
  // Each get() sleeps 2-6 ms: the whole data set would take seconds even on three threads.
  auto dataset = std::make_shared<ProbeDataset>(2000, std::chrono::microseconds(2000));
  const int64_t batch_size = 4, workers = 3, prefetch = 2;
  auto start = std::chrono::steady_clock::now();
  {
    data::DataLoader loader(dataset, {.batch_size = batch_size, .num_workers = workers, .prefetch_factor = prefetch});
    for (const data::Batch& batch : loader) {
      CHECK(batch.input.size(0) == batch_size);
      std::this_thread::sleep_for(std::chrono::milliseconds(60));  // let the workers fill the window
      start = std::chrono::steady_clock::now();
      break;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 0.5);  // a worker finishes at most the example it is in (<= 6 ms) before joining
  const int64_t calls = dataset->calls;
  // Batch 0 plus at most workers * prefetch batches claimed ahead of the consumer.
  CHECK(calls <= (1 + workers * prefetch) * batch_size);
  CHECK(calls > batch_size);  // the workers did prefetch
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(dataset->calls == calls);  // nobody is still loading
}

TEST_CASE("an exception while making a batch reaches the consumer at that batch, with or without workers") {
  auto dataset = std::make_shared<ProbeDataset>(40, std::chrono::microseconds(20), /*fail_at=*/13);
  for (int workers : {0, 3}) {
    CAPTURE(workers);
    data::DataLoader loader(dataset, {.batch_size = 4, .num_workers = workers});
    int64_t delivered = 0;
    auto consume = [&] {
      for (const data::Batch& batch : loader) {
        CHECK(as_int64(batch.target).front() == 4 * delivered);
        ++delivered;
      }
    };
    CHECK_THROWS_WITH_AS(consume(), doctest::Contains("bad example 13"), Error);
    CHECK(delivered == 3);  // batches 0, 1, 2 came first; batch 3 holds example 13
  }
}

// ---- transforms ----

TEST_CASE("ToFloat maps u8 pixels to f32 in [0, 1]") {
  const Tensor pixels = tensor(std::vector<uint8_t>{0, 51, 255, 128}, {1, 2, 2});
  const Tensor image = data::ToFloat{}(pixels);
  CHECK(image.dtype() == DType::f32);
  CHECK(image.sizes() == Shape{1, 2, 2});
  const auto v = test::values(image);
  CHECK(v[0] == 0.0);
  CHECK(v[1] == doctest::Approx(0.2).epsilon(1e-6));  // f32 rounding of 51 / 255
  CHECK(v[2] == 1.0);
  CHECK_THROWS_WITH_AS(data::ToFloat{}(zeros({2})), doctest::Contains("expected u8"), Error);
}

TEST_CASE("Normalize subtracts each channel's mean and divides by its std") {
  const Tensor image = rand({2, 3, 4}, {}, &test::rng());
  const Tensor out = data::Normalize({0.5, 0.25}, {2.0, 0.5})(image);
  const Tensor mean = tensor(std::vector<float>{0.5f, 0.25f}, {2, 1, 1});
  const Tensor deviation = tensor(std::vector<float>{2.0f, 0.5f}, {2, 1, 1});
  CHECK(test::max_abs_diff(out, (image - mean) / deviation) < 1e-6);  // f32 rounding of one subtract and divide
  const Tensor one_for_all = data::Normalize({0.5}, {2.0})(image.transpose(1, 2));  // any layout
  CHECK(test::max_abs_diff(one_for_all, (image.transpose(1, 2) - 0.5) / 2.0) < 1e-6);
  CHECK_THROWS_WITH_AS(data::Normalize({0.5, 0.5, 0.5}, {1, 1, 1})(image), doctest::Contains("2 channels"), Error);
  CHECK_THROWS_WITH_AS(data::Normalize({0.5}, {0.0}), doctest::Contains("zero"), Error);
}

TEST_CASE("Compose applies its transforms in order") {
  const Tensor pixels = tensor(std::vector<uint8_t>{255, 0}, {1, 2});
  const data::Compose pipeline({data::ToFloat{}, data::Normalize({0.5}, {0.5})});
  CHECK(test::values(pipeline(pixels)) == std::vector<double>{1.0, -1.0});
}

// ---- IDX files ----

TEST_CASE("read_idx reads raw and gzip-compressed files alike") {
  TempDir dir("idx_read");
  const std::vector<uint8_t> payload = random_bytes(3 * 4 * 5);
  const std::string bytes = idx_bytes(0x00000803, {3, 4, 5}, payload);
  write_raw(dir.path / "images-idx3-ubyte", bytes);
  write_gzip(dir.path / "images-idx3-ubyte.gz", bytes);
  for (const char* name : {"images-idx3-ubyte", "images-idx3-ubyte.gz"}) {
    CAPTURE(name);
    const Tensor images = data::read_idx((dir.path / name).string(), 3);
    CHECK(images.dtype() == DType::u8);
    CHECK(images.sizes() == Shape{3, 4, 5});
    const uint8_t* data = images.data_ptr<uint8_t>();
    CHECK(std::vector<uint8_t>(data, data + payload.size()) == payload);
  }
  const std::vector<uint8_t> labels = {3, 1, 4, 1, 5};
  write_gzip(dir.path / "labels-idx1-ubyte.gz", idx_bytes(0x00000801, {5}, labels));
  const Tensor read = data::read_idx((dir.path / "labels-idx1-ubyte.gz").string(), 1);
  CHECK(read.sizes() == Shape{5});
  CHECK(std::vector<uint8_t>(read.data_ptr<uint8_t>(), read.data_ptr<uint8_t>() + 5) == labels);
}

TEST_CASE("read_idx names the file and what it expected on a bad magic number, a short file or extra bytes") {
  TempDir dir("idx_errors");
  const std::vector<uint8_t> payload = random_bytes(2 * 2 * 2);
  const std::string good = idx_bytes(0x00000803, {2, 2, 2}, payload);

  const fs::path labels = dir.path / "labels.gz";
  write_gzip(labels, idx_bytes(0x00000801, {8}, payload));
  CHECK_THROWS_WITH_AS(data::read_idx(labels.string(), 3),
                       contains(labels.string() + ": expected the magic number 0x00000803 "
                                                  "(unsigned bytes, 3 dims), found 0x00000801"),
                       Error);
  const fs::path floats = dir.path / "floats";
  write_raw(floats, idx_bytes(0x00000D03, {2, 2, 2}, payload));
  CHECK_THROWS_WITH_AS(data::read_idx(floats.string(), 3), doctest::Contains("found 0x00000D03"), Error);

  const fs::path truncated = dir.path / "truncated.gz";
  write_gzip(truncated, good.substr(0, good.size() - 3));
  CHECK_THROWS_WITH_AS(data::read_idx(truncated.string(), 3),
                       contains(truncated.string() + ": the header announces [2, 2, 2] = 8 payload "
                                                     "bytes, found only 5"),
                       Error);
  const fs::path short_header = dir.path / "short_header";
  write_raw(short_header, good.substr(0, 10));
  CHECK_THROWS_WITH_AS(data::read_idx(short_header.string(), 3), doctest::Contains("16-byte header"), Error);

  const fs::path trailing = dir.path / "trailing";
  write_raw(trailing, good + "xyz");
  CHECK_THROWS_WITH_AS(data::read_idx(trailing.string(), 3),
                       contains(trailing.string() + ": expected the file to end after the 8 payload "
                                                    "bytes of [2, 2, 2], found 3 more bytes"),
                       Error);

  const fs::path missing = dir.path / "missing-idx3-ubyte.gz";
  CHECK_THROWS_WITH_AS(data::read_idx(missing.string(), 3),
                       contains("cannot open " + missing.string() + ": No such file"), Error);
}

TEST_CASE("read_idx checks the header's sizes before allocating: overflow, a limit, the raw file's size") {
  TempDir dir("idx_header");
  const fs::path overflowing = dir.path / "overflowing.gz";
  write_gzip(overflowing, idx_bytes(0x00000803, {0, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  CHECK_THROWS_WITH_AS(data::read_idx(overflowing.string(), 3),
                       contains(overflowing.string() + ": the sizes [0, 4294967295, 4294967295] overflow int64"),
                       Error);

  // 2^42 bytes announced by a 16-byte file, compressed or not.
  for (const char* name : {"huge", "huge.gz"}) {
    const fs::path huge = dir.path / name;
    const std::string bytes = idx_bytes(0x00000803, {1u << 20, 1u << 12, 1u << 10}, {});
    if (huge.extension() == ".gz") write_gzip(huge, bytes);
    else write_raw(huge, bytes);
    CHECK_THROWS_WITH_AS(data::read_idx(huge.string(), 3),
                         contains(huge.string() + ": the header announces [1048576, 4096, 1024] = 4398046511104 "
                                                  "payload bytes, more than the 4294967296 bytes read_idx accepts"),
                         Error);
  }

  // Under the limit but more than a raw file holds: refused from the file's size.
  const fs::path claims_more = dir.path / "claims_more";
  write_raw(claims_more, idx_bytes(0x00000803, {1000, 1000, 1000}, random_bytes(10)));
  CHECK_THROWS_WITH_AS(data::read_idx(claims_more.string(), 3),
                       contains(claims_more.string() + ": the header announces [1000, 1000, 1000] = 1000000000 "
                                                       "payload bytes, found only 10 (truncated file)"),
                       Error);
}

TEST_CASE("read_idx stops reading a gzip stream at the first 64 KiB past the payload") {
  // 8 payload bytes, then 64 MiB of zeros that gzip packs into about 64 KB: a gzip bomb. The
  // reader must refuse it without inflating all of it.
  TempDir dir("idx_bomb");
  const fs::path bomb = dir.path / "bomb-idx3-ubyte.gz";
  gzFile file = gzopen(bomb.c_str(), "wb9");
  REQUIRE(file != nullptr);
  const std::string header = idx_bytes(0x00000803, {2, 2, 2}, random_bytes(8));
  REQUIRE(gzwrite(file, header.data(), static_cast<unsigned>(header.size())) == static_cast<int>(header.size()));
  const std::vector<char> zeros(1 << 20, 0);
  for (int i = 0; i < 64; ++i) REQUIRE(gzwrite(file, zeros.data(), static_cast<unsigned>(zeros.size())) > 0);
  REQUIRE(gzclose(file) == Z_OK);
  CHECK_THROWS_WITH_AS(data::read_idx(bomb.string(), 3),
                       contains(bomb.string() + ": expected the file to end after the 8 payload bytes of [2, 2, 2], "
                                                "found more than 65536 more bytes"),
                       Error);
}

// ---- Fashion-MNIST ----

TEST_CASE("FashionMNIST reads the installed training and test sets") {
  const std::string root = data::FashionMNIST::kDefaultRoot;
  if (!fs::is_directory(root)) {
    MESSAGE("skipped: ", root, " is absent (install the Debian package dataset-fashion-mnist)");
    return;
  }
  const data::FashionMNIST train(root, true);
  const data::FashionMNIST test_set(root, false);
  CHECK(train.size() == 60000);
  CHECK(test_set.size() == 10000);
  CHECK(train.images().sizes() == Shape{60000, 1, 28, 28});
  CHECK(data::FashionMNIST::classes().size() == 10);

  for (const data::FashionMNIST* set : {&train, &test_set}) {
    const int64_t* labels = set->labels().data_ptr<int64_t>();
    const auto [lowest, highest] = std::minmax_element(labels, labels + set->size());
    CHECK(*lowest == 0);
    CHECK(*highest == 9);
  }

  // The first training label as the file holds it: byte 8, after the magic number and the count.
  gzFile file = gzopen((fs::path(root) / "train-labels-idx1-ubyte.gz").c_str(), "rb");
  REQUIRE(file != nullptr);
  unsigned char header_and_first[9];
  REQUIRE(gzread(file, header_and_first, 9) == 9);
  gzclose(file);
  const data::Example first = train.get(0);
  CHECK(first.target.dtype() == DType::i64);
  CHECK(first.target.sizes() == Shape{});
  CHECK(first.target.item<int64_t>() == header_and_first[8]);

  CHECK(first.input.sizes() == Shape{1, 28, 28});
  CHECK(first.input.dtype() == DType::f32);
  const auto pixels = test::values(first.input);
  CHECK(*std::min_element(pixels.begin(), pixels.end()) >= 0.0);
  CHECK(*std::max_element(pixels.begin(), pixels.end()) <= 1.0);

  // kMean and kStd are the training pixels' statistics rounded to 4 digits.
  double sum = 0, sum_of_squares = 0;
  const uint8_t* bytes = train.images().data_ptr<uint8_t>();
  const int64_t count = train.images().numel();
  for (int64_t i = 0; i < count; ++i) {
    const double pixel = bytes[i] / 255.0;
    sum += pixel;
    sum_of_squares += pixel * pixel;
  }
  const double mean = sum / static_cast<double>(count);
  CHECK(std::abs(mean - data::FashionMNIST::kMean) < 5e-5);
  CHECK(std::abs(std::sqrt(sum_of_squares / static_cast<double>(count) - mean * mean) - data::FashionMNIST::kStd) <
        5e-5);

  const data::FashionMNIST normalized(root, false,
                                      data::Normalize({data::FashionMNIST::kMean}, {data::FashionMNIST::kStd}));
  CHECK(test::max_abs_diff(normalized.get(3).input,
                           (test_set.get(3).input - data::FashionMNIST::kMean) / data::FashionMNIST::kStd) < 1e-6);
}

TEST_CASE("FashionMNIST names the missing file and the package that provides it") {
  TempDir dir("fashion_missing");
  CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string(), true),
                       contains((dir.path / "train-images-idx3-ubyte.gz").string()), Error);
  CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string(), true),
                       doctest::Contains("install the Debian package dataset-fashion-mnist (scripts/setup.sh does)"),
                       Error);
}
