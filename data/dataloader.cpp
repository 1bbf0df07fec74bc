#include "data/dataloader.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "core/cuda_runtime/runtime.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "data/placement.h"
#include "data/plain_copy.h"

namespace sg::data {

namespace {

// Example i's `field` for every i, stacked into [B, ...] (see default_collate).
Tensor stack_field(const std::vector<Example>& examples, Tensor Example::*field, const char* name) {
  const Tensor& first = examples.front().*field;
  const auto count = static_cast<int64_t>(examples.size());
  for (int64_t i = 0; i < count; ++i)
    SG_CHECK((examples[i].*field).defined() == first.defined(), "default_collate: example ", i, "'s ", name, " is ",
             first.defined() ? "undefined" : "defined", " but example 0's is not");
  if (!first.defined()) return Tensor();

  Shape shape = first.sizes();
  shape.insert(shape.begin(), count);
  Tensor out = empty(shape, {first.dtype(), Device::cpu()});
  const size_t bytes_per_example = static_cast<size_t>(first.numel()) * first.element_size();
  char* destination = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < count; ++i) {
    const Tensor& t = examples[i].*field;
    SG_CHECK(t.sizes() == first.sizes() && t.dtype() == first.dtype(), "default_collate: example ", i, "'s ", name,
             " is ", shape_str(t.sizes()), " ", t.dtype(), " but example 0's is ", shape_str(first.sizes()), " ",
             first.dtype(), "; a custom collate can pad or crop them");
    copy_elements(destination + static_cast<size_t>(i) * bytes_per_example, t);
  }
  return out;
}

}  // namespace

Batch default_collate(const std::vector<Example>& examples) {
  SG_CHECK(!examples.empty(), "default_collate: a batch needs at least one example");
  return {stack_field(examples, &Example::input, "input"), stack_field(examples, &Example::target, "target")};
}

// ---- one pass: Note [Worker threads and batch order] in dataloader.h ----

class DataLoader::Iterator::Pass {
public:
  Pass(std::shared_ptr<const Dataset> dataset, Collate collate, std::vector<std::vector<int64_t>> batches,
       uint64_t seed, PassStart start, int num_workers, int prefetch_factor, bool pin_memory, Device device,
       std::shared_ptr<PassObserver> observer)
      : dataset_(std::move(dataset)),
        collate_(std::move(collate)),
        batches_(std::move(batches)),
        seed_(seed),
        epoch_(start.epoch),
        window_(static_cast<int64_t>(num_workers) * prefetch_factor),
        pin_memory_(pin_memory),
        device_(device),
        observer_(std::move(observer)),
        current_(start.first_batch - 1),
        next_to_claim_(start.first_batch),
        next_to_deliver_(start.first_batch) {
    try {
      for (int w = 0; w < num_workers; ++w) workers_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& error) {  // could not start every thread: stop those that did start
      const size_t started = workers_.size();
      stop_and_join();
      SG_FAIL("DataLoader: the system started ", started, " of num_workers = ", num_workers,
              " worker threads, then refused: ", error.what());
    } catch (...) {
      stop_and_join();
      throw;
    }
  }
  ~Pass() {
    stop_and_join();
    if (observer_) observer_->pass_ends();
  }

  bool at_end() const { return current_ == static_cast<int64_t>(batches_.size()); }
  const Batch& batch() const { return batch_; }

  // Moves to the next batch in order, making it here or taking it from the workers, and puts it
  // on the loader's device (Note [Pinned staging and device placement] in data/placement.h).
  void advance() {
    // The time the training loop waits for its batch (or makes it, without workers).
    const profiler::RecordScope scope("DataLoader.next", profiler::Category::dataloader);
    const int64_t next = current_ + 1;
    current_ = next;
    if (at_end()) return;
    if (workers_.empty()) {
      batch_ = on_device(make_batch(next));
      if (observer_) observer_->batch_begins(next);
      return;
    }
    Outcome outcome;
    {
      std::unique_lock lock(mutex_);
      batch_done_.wait(lock, [&] { return ready_.contains(next); });
      auto entry = ready_.find(next);
      outcome = std::move(entry->second);
      ready_.erase(entry);
      next_to_deliver_ = next + 1;  // frees a slot in the window
    }
    work_available_.notify_all();
    if (outcome.error) std::rethrow_exception(outcome.error);
    batch_ = on_device(std::move(outcome.batch));
    if (observer_) observer_->batch_begins(next);
  }

private:
  struct Outcome {
    Batch batch;
    std::exception_ptr error;
  };

  Batch make_batch(int64_t index) const {
    const profiler::RecordScope scope("DataLoader.make_batch", profiler::Category::dataloader);
    std::vector<Example> examples;
    examples.reserve(batches_[index].size());
    for (int64_t example : batches_[index]) {
      if (stopping_) return {};  // the consumer has gone; nobody will read this batch
      // The example's own random stream: Note [Per-example random draws] in data/dataset.h.
      Generator generator = example_generator(seed_, epoch_, example);
      examples.push_back(dataset_->get_augmented(example, generator));
    }
    Batch batch = collate_(examples);
    if (!pin_memory_) return batch;
    return {pinned_copy(batch.input), pinned_copy(batch.target)};
  }

  Batch on_device(Batch batch) const {
    return {copied_to_device(batch.input, device_), copied_to_device(batch.target, device_)};
  }

  void work(int worker) {
    profiler::set_thread_name("DataLoader worker " + std::to_string(worker));
    // Data loading runs beside the training step, not inside the OpenMP pool (Note [Data code
    // does not use the thread pool] in data/plain_copy.h). OpenMP's thread count is per calling
    // thread, so this keeps any op a user's dataset or collate calls on this thread alone.
    set_num_threads(1);
    const auto count = static_cast<int64_t>(batches_.size());
    for (;;) {
      int64_t index = 0;
      {
        std::unique_lock lock(mutex_);
        work_available_.wait(
            lock, [&] { return stopping_ || next_to_claim_ == count || next_to_claim_ < next_to_deliver_ + window_; });
        if (stopping_ || next_to_claim_ == count) return;
        index = next_to_claim_++;
      }
      Outcome outcome;
      try {
        // A new thread's current GPU is GPU 0, and its first page-locked allocation would create a
        // CUDA context there (memory on another process's GPU under sgrun), so a worker pinning
        // for a GPU works on that GPU, as torch's pin-memory thread does. Inside the try: an error
        // reaches the consumer with the batch.
        if (pin_memory_ && device_.is_cuda()) cuda::set_device(device_.index);
        outcome.batch = make_batch(index);
      } catch (...) {
        outcome.error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        ready_.emplace(index, std::move(outcome));
      }
      batch_done_.notify_one();
    }
  }

  void stop_and_join() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_available_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  const std::shared_ptr<const Dataset> dataset_;
  const Collate collate_;
  const std::vector<std::vector<int64_t>> batches_;
  const uint64_t seed_;  // with epoch_, what the examples' random draws derive from
  const int64_t epoch_;
  const int64_t window_;   // batches claimed by workers but not yet delivered, at most
  const bool pin_memory_;  // only when a GPU is usable (DataLoader's constructor decides)
  const Device device_;
  const std::shared_ptr<PassObserver> observer_;
  int64_t current_;  // index of batch_ (a pass may begin after batch 0: skip_first_batches)
  Batch batch_;

  std::mutex mutex_;  // guards the three members below
  int64_t next_to_claim_;
  int64_t next_to_deliver_;
  std::map<int64_t, Outcome> ready_;    // made but not yet delivered, by batch index
  std::atomic<bool> stopping_ = false;  // also read without the lock between examples
  std::condition_variable work_available_;
  std::condition_variable batch_done_;
  std::vector<std::thread> workers_;
};

DataLoader::Iterator::Iterator(std::unique_ptr<Pass> pass) : pass_(std::move(pass)) { pass_->advance(); }
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

const Batch& DataLoader::Iterator::operator*() const {
  SG_CHECK(pass_ != nullptr && !pass_->at_end(), "DataLoader: dereferenced an iterator past the last batch");
  return pass_->batch();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  SG_CHECK(pass_ != nullptr && !pass_->at_end(), "DataLoader: advanced an iterator past the last batch");
  pass_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const { return pass_ == nullptr || pass_->at_end(); }

// ---- DataLoader ----

namespace {
std::shared_ptr<const Sampler> choose_sampler(const Dataset& dataset, const DataLoaderOptions& options) {
  if (options.sampler) {
    SG_CHECK(!options.shuffle,
             "DataLoader: the sampler option is mutually exclusive with shuffle "
             "(the sampler decides the order)");
    return options.sampler;
  }
  if (options.shuffle) return std::make_shared<RandomSampler>(dataset.size(), options.seed);
  return std::make_shared<SequentialSampler>(dataset.size());
}

std::shared_ptr<const BatchSampler> choose_batch_sampler(const Dataset& dataset, const DataLoaderOptions& options) {
  if (!options.batch_sampler)
    return std::make_shared<BatchSampler>(choose_sampler(dataset, options), options.batch_size, options.drop_last);
  SG_CHECK(!options.sampler && !options.shuffle && !options.drop_last,
           "DataLoader: the batch_sampler option is mutually exclusive with sampler, shuffle and drop_last "
           "(the batch sampler decides the batches)");
  return options.batch_sampler;
}

const Dataset& checked(const std::shared_ptr<const Dataset>& dataset) {
  SG_CHECK(dataset != nullptr, "DataLoader: the dataset is null");
  return *dataset;
}
}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      batch_sampler_(choose_batch_sampler(checked(dataset_), options_)) {
  SG_CHECK(options_.num_workers >= 0 && options_.num_workers <= kMaxLoaderWorkers,
           "DataLoader: num_workers must lie in [0, ", kMaxLoaderWorkers, "] (threads), got ", options_.num_workers);
  SG_CHECK(options_.prefetch_factor >= 1, "DataLoader: prefetch_factor must be at least 1, got ",
           options_.prefetch_factor);
  if (!options_.collate) options_.collate = default_collate;
  // Fails here, naming the reason, rather than at the first batch.
  SG_CHECK(options_.device.is_cpu() || cuda::is_available(), "DataLoader: batches on ", options_.device,
           " were asked for, but CUDA is not available: ", cuda::unavailable_reason());
  SG_CHECK(options_.device.is_cpu() || (options_.device.index >= 0 && options_.device.index < cuda::device_count()),
           "DataLoader: batches on ", options_.device, " were asked for, but this machine has ", cuda::device_count(),
           " GPU(s)");
  options_.pin_memory = options_.pin_memory && cuda::is_available();
}

void DataLoader::skip_first_batches(int64_t batches) {
  SG_CHECK(batches >= 0 && batches <= size(), "DataLoader::skip_first_batches: expected 0 to ", size(),
           " batches (one epoch), got ", batches);
  skip_ = batches;
}

DataLoader::Iterator DataLoader::begin() {
  PassStart start{epoch_, std::exchange(skip_, 0)};
  if (options_.observer) start = options_.observer->pass_begins(start);
  std::unique_ptr<Iterator::Pass> pass;
  try {
    const BatchSampler& batches = start.batches ? *start.batches : *batch_sampler_;
    SG_CHECK(start.first_batch >= 0 && start.first_batch <= batches.size(), "DataLoader: a pass cannot begin at batch ",
             start.first_batch, " of ", batches.size());
    pass = std::make_unique<Iterator::Pass>(dataset_, options_.collate, batches.batches(start.epoch), options_.seed,
                                            start, options_.num_workers, options_.prefetch_factor, options_.pin_memory,
                                            options_.device, options_.observer);
  } catch (...) {  // the observer heard the pass begin; it must hear it end
    if (options_.observer) options_.observer->pass_ends();
    throw;
  }
  epoch_ = start.epoch + 1;
  return Iterator(std::move(pass));
}

}  // namespace sg::data
