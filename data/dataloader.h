#pragma once
// defines: Batch, Collate, default_collate, DataLoaderOptions, DataLoader — a data set's
//          examples grouped into batches in sampler order, optionally prepared ahead by worker
//          threads (torch.utils.data.DataLoader).
//
//   auto train = std::make_shared<data::FashionMNIST>();
//   data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .num_workers = 2});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const data::Batch& batch : loader) { ... batch.input [64, 1, 28, 28] ... }
//
// Note [Worker threads and batch order]
// With num_workers = W > 0, a pass starts W std::threads. Each claims the next batch index not
// yet claimed, loads its examples, collates them and files the result under that index; at
// most W * prefetch_factor batches are claimed but not yet delivered, which bounds memory. The
// consumer takes batch 0, 1, 2, ... in order, waiting for the one it needs, so the batches and
// their order are exactly those of num_workers = 0, whatever thread made them. An exception in
// a worker is stored with its batch and rethrown by the consumer when it reaches that batch.
// Leaving the loop (break, exception) destroys the iterator, which tells the workers to stop
// (they check between examples) and joins them.
//
// Note [Following a loader's passes]
// A PassObserver in the options hears where each pass begins, each batch just before the loop
// body sees it, and the end of the pass (the iterator's destruction: finished, break or
// exception), on the consuming thread. dist::Accelerator follows its loaders this way: which
// batch the loop is on decides what gather_for_metrics drops and when gradients synchronise,
// and the pass in progress is what save_state records and load_state resumes.
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"

namespace sg::data {

struct Batch {
  Tensor input;   // [B, ...]
  Tensor target;  // [B, ...]
};

// Turns one batch's examples (in sampler order) into a Batch. Runs on worker threads.
using Collate = std::function<Batch(const std::vector<Example>&)>;

// Stacks the inputs into [B, ...input shape] and the targets into [B, ...target shape] with one
// allocation per field and one memcpy per example; every example must agree in shape and dtype.
// A field undefined in every example (a data set without targets) stays undefined.
Batch default_collate(const std::vector<Example>& examples);

// Where a pass begins: its epoch and the first batch of that epoch it hands out, of the loader's
// own batches or, when `batches` is set, of those (the rest of an epoch dealt to another number of
// processes: Note [Resuming on another world size] in train/loader_tracker.h).
struct PassStart {
  int64_t epoch = 0;
  int64_t first_batch = 0;
  std::shared_ptr<const BatchSampler> batches = {};
};

// Follows a loader's passes (Note [Following a loader's passes]).
class PassObserver {
public:
  virtual ~PassObserver() = default;
  // A pass is about to begin at `planned`; returns where it begins (the Accelerator moves it to
  // a position restored by load_state).
  virtual PassStart pass_begins(PassStart planned) = 0;
  virtual void batch_begins(int64_t batch) = 0;  // the loop body is about to see batch `batch`
  virtual void pass_ends() = 0;
};

// The most worker threads a DataLoader starts: far more than any machine's cores, and few enough
// that asking for more is a clear error here rather than the system's "Resource temporarily
// unavailable" after thousands of threads.
constexpr int kMaxLoaderWorkers = 1024;

// Defaults are torch's, except the explicit shuffling seed (DESIGN: every draw is seeded).
struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;     // RandomSampler(seed) rather than SequentialSampler
  bool drop_last = false;   // drop the last batch when it would be smaller than batch_size
  int num_workers = 0;      // 0: each batch is made on the consuming thread when it is needed
  int prefetch_factor = 2;  // batches in flight per worker
  uint64_t seed = 0;        // shuffling seed (the order of epoch e comes from seed + e) and the
                            // augmentation seed (Note [Per-example random draws] in data/dataset.h)
  Collate collate = {};     // empty: default_collate
  // Decides the order instead of `shuffle` (e.g. a DistributedSampler); excludes shuffle = true.
  std::shared_ptr<const Sampler> sampler = {};
  // Decides the batches themselves (torch's batch_sampler=, e.g. a DistributedBatchSampler);
  // excludes sampler, shuffle and drop_last, and its own batch size replaces batch_size.
  std::shared_ptr<const BatchSampler> batch_sampler = {};
  std::shared_ptr<PassObserver> observer = {};  // Note [Following a loader's passes]
  // Batches in page-locked host memory, from which a GPU copies at full speed. Without a usable
  // GPU there is no page-locked memory and the option is ignored, as torch's (which only warns).
  bool pin_memory = false;
  // Where the batches are handed out (Accelerate's device placement; dist::Accelerator sets it):
  // a GPU receives each batch as the loop reaches it. Note [Pinned staging and device placement]
  // in data/placement.h.
  Device device = Device::cpu();
};

class DataLoader {
public:
  class Iterator;

  explicit DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  int64_t size() const { return batch_sampler_->size(); }  // batches per epoch
  const Dataset& dataset() const { return *dataset_; }
  // What makes the batches: options.batch_sampler, or the one made from the other options.
  const BatchSampler& batch_sampler() const { return *batch_sampler_; }

  // Each call to begin() is one pass and uses the next epoch number (Note [Epochs and
  // shuffling] in data/sampler.h); set_epoch chooses the one the next pass uses, e.g. on resume.
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // The next pass starts at batch `batches` of its epoch, the earlier ones skipped unread
  // (Accelerate's skip_first_batches, for a resume in the middle of an epoch); later passes are
  // whole again.
  void skip_first_batches(int64_t batches);
  // The batch the next pass starts at: 0, or what skip_first_batches asked for.
  int64_t next_pass_first_batch() const { return skip_; }

  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<const BatchSampler> batch_sampler_;
  int64_t epoch_ = 0;
  int64_t skip_ = 0;  // batches the next pass skips
};

// One pass over the loader; owns its worker threads, which stop when it is destroyed.
class DataLoader::Iterator {
public:
  using iterator_concept = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;

  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  const Batch& operator*() const;
  const Batch* operator->() const { return &**this; }
  Iterator& operator++();  // rethrows an exception raised while making the next batch
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const;

private:
  friend class DataLoader;
  class Pass;
  explicit Iterator(std::unique_ptr<Pass> pass);
  std::unique_ptr<Pass> pass_;
};

}  // namespace sg::data
