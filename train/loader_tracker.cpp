#include "train/loader_tracker.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace sg::dist {

struct LoaderTracker::State {
  struct Loader {
    std::shared_ptr<const data::DistributedBatchSampler> batches;
    std::optional<ResumePoint> resume_at;  // set by resume(), used by the next pass
    // The batches of the pass in progress: `batches`, or the rest of an epoch dealt anew.
    std::shared_ptr<const data::DistributedBatchSampler> pass_batches;
    int64_t epoch = 0;   // of the pass in progress
    int64_t batch = -1;  // the batch in progress (-1: none handed out yet)
  };
  std::vector<Loader> loaders;
  std::vector<size_t> active;  // indices into loaders, innermost pass last
};

class LoaderTracker::Observer : public data::PassObserver {
public:
  Observer(std::shared_ptr<State> state, size_t loader) : state_(std::move(state)), loader_(loader) {}

  data::PassStart pass_begins(data::PassStart planned) override {
    State::Loader& loader = state_->loaders[loader_];
    loader.pass_batches = loader.batches;
    if (loader.resume_at.has_value()) {
      planned = {loader.resume_at->epoch, loader.resume_at->batch, loader.resume_at->batches};
      if (loader.resume_at->batches != nullptr) loader.pass_batches = loader.resume_at->batches;
      loader.resume_at.reset();
    }
    loader.epoch = planned.epoch;
    loader.batch = planned.first_batch - 1;
    state_->active.push_back(loader_);
    return planned;
  }

  void batch_begins(int64_t batch) override { state_->loaders[loader_].batch = batch; }

  void pass_ends() override {
    // The innermost pass of this loader; passes of different loaders may end out of order
    // (two iterators alive side by side).
    auto& active = state_->active;
    const auto innermost = std::find(active.rbegin(), active.rend(), loader_);
    if (innermost != active.rend()) active.erase(std::next(innermost).base());
  }

private:
  std::shared_ptr<State> state_;
  size_t loader_;
};

LoaderTracker::LoaderTracker() : state_(std::make_shared<State>()) {}

std::shared_ptr<data::PassObserver> LoaderTracker::track(std::shared_ptr<const data::DistributedBatchSampler> batches) {
  state_->loaders.push_back({batches, std::nullopt, batches});
  return std::make_shared<Observer>(state_, state_->loaders.size() - 1);
}

std::optional<LoaderTracker::Current> LoaderTracker::current() const {
  if (state_->active.empty()) return std::nullopt;
  const State::Loader& loader = state_->loaders[state_->active.back()];
  if (loader.batch < 0) return std::nullopt;  // the pass has not handed out a batch yet
  return Current{loader.pass_batches.get(), loader.batch};
}

std::vector<std::optional<LoaderPosition>> LoaderTracker::positions() const {
  std::vector<std::optional<LoaderPosition>> result(state_->loaders.size());
  for (size_t index : state_->active) {
    const State::Loader& loader = state_->loaders[index];
    result[index] = position_of(*loader.pass_batches, loader.epoch, loader.batch + 1);
  }
  return result;
}

void LoaderTracker::resume(const std::vector<std::optional<LoaderPosition>>& positions, int accumulation_steps) {
  SG_CHECK(positions.size() == state_->loaders.size(), "the state holds the positions of ", positions.size(),
           " prepared loader(s), but ", state_->loaders.size(), " were prepared; prepare the same loaders, in the ",
           "same order, before load_state");
  std::vector<std::optional<ResumePoint>> starts(positions.size());
  for (size_t index = 0; index < positions.size(); ++index) {  // check them all before changing any
    const std::optional<LoaderPosition>& position = positions[index];
    if (!position.has_value()) continue;
    starts[index] = pass_to_resume(*state_->loaders[index].batches, *position, accumulation_steps,
                                   "loader " + std::to_string(index));
  }
  for (size_t index = 0; index < positions.size(); ++index)
    if (starts[index].has_value()) state_->loaders[index].resume_at = starts[index];
}

std::optional<ResumePoint> LoaderTracker::pending_resume(const data::BatchSampler& batches) const {
  for (const State::Loader& loader : state_->loaders)
    if (static_cast<const data::BatchSampler*>(loader.batches.get()) == &batches) return loader.resume_at;
  return std::nullopt;
}

namespace {

std::string processes(int64_t count) { return std::to_string(count) + (count == 1 ? " process" : " processes"); }

// Why no batch of `batches` begins exactly at `position` (G < N, world size recorded), or nullopt
// when batch G / (B * W) does (Note [Resuming on another world size]).
std::optional<std::string> no_batch_begins_at(const data::DistributedBatchSampler& batches,
                                              const LoaderPosition& position, int accumulation_steps) {
  const int world = batches.sampler().num_replicas();
  const int64_t step = batches.batch_size() * world;  // list positions per batch of every rank
  if (position.sample % step != 0)
    return detail::concat("its batches begin at multiples of ", world, " x ", batches.batch_size(), " examples");
  const int64_t batch = position.sample / step;
  const bool moved = world != position.world_size || batch != position.batch;
  if (moved && batch % accumulation_steps != 0)
    return detail::concat("it is its batch ", batch, ", inside a window of ", accumulation_steps,
                          " accumulated batches");
  return std::nullopt;
}

// The message of a position this run cannot resume at as asked: both world sizes, the position, the reason.
Error refusal(const data::DistributedBatchSampler& batches, const LoaderPosition& position, const std::string& name,
              const std::string& reason) {
  return Error(detail::concat(name, ": saved by ", processes(position.world_size), " at global sample ",
                              position.sample, " of epoch ", position.epoch, " (their batch ", position.batch,
                              "), which this run of ", processes(batches.sampler().num_replicas()), " with ",
                              batches.batch_size(), " examples each cannot resume at: ", reason));
}

}  // namespace

LoaderPosition position_of(const data::DistributedBatchSampler& batches, int64_t epoch, int64_t batch) {
  return {epoch, batch, batches.sampler().num_replicas(), batches.first_position(batch)};
}

ResumePoint pass_to_resume(const data::DistributedBatchSampler& batches, const LoaderPosition& position,
                           int accumulation_steps, const std::string& name) {
  SG_CHECK(position.epoch >= 0, name, ": epoch ", position.epoch, " is negative");
  SG_CHECK(position.batch >= 0, name, ": batch ", position.batch, " is negative");
  const int64_t epoch_batches = batches.size();
  if (position.world_size == 0) {  // saved before the world size was recorded: its batch, as then
    SG_CHECK(position.batch <= epoch_batches, name, ": batch ", position.batch, " is not within an epoch of ",
             epoch_batches, " batches; was it prepared with another batch size, data set or number of processes?");
    return {position.epoch, position.batch};
  }
  SG_CHECK(position.world_size >= 1, name, ": world_size ", position.world_size, " is not a number of processes");
  SG_CHECK(position.sample >= 0, name, ": sample ", position.sample, " is negative");
  if (position.sample >= batches.sampler().dataset_size()) return {position.epoch, epoch_batches};  // the pass was over
  if (!no_batch_begins_at(batches, position, accumulation_steps))
    return {position.epoch, position.sample / (batches.batch_size() * batches.sampler().num_replicas())};
  std::shared_ptr<const data::DistributedBatchSampler> rest = batches.starting_at(position.sample);
  if (batches.drop_last() && rest->sampler().num_samples() % batches.batch_size() != 0)
    throw refusal(batches, position, name,
                  detail::concat("dealt to ", processes(rest->sampler().num_replicas()), ", the epoch's remaining ",
                                 rest->sampler().examples_in_list(), " examples leave ", rest->sampler().num_samples(),
                                 " per process, not a multiple of the batch size, and drop_last would skip some; ",
                                 "resume on a number of processes whose batches begin at sample ", position.sample,
                                 " (", processes(position.world_size), " as saved do), or without drop_last"));
  return {position.epoch, 0, std::move(rest)};
}

int64_t batch_to_resume(const data::DistributedBatchSampler& batches, const LoaderPosition& position,
                        int accumulation_steps, const std::string& name) {
  const ResumePoint point = pass_to_resume(batches, position, accumulation_steps, name);
  if (point.batches != nullptr)
    throw refusal(batches, position, name,
                  detail::concat(*no_batch_begins_at(batches, position, accumulation_steps),
                                 "; resume with a number of processes and a batch size whose batches begin at sample ",
                                 position.sample, " (", processes(position.world_size), " as saved do)"));
  return point.batch;
}

}  // namespace sg::dist
