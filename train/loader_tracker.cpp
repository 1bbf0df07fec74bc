#include "train/loader_tracker.h"

#include <algorithm>

#include "core/error.h"

namespace sg::dist {

struct LoaderTracker::State {
  struct Loader {
    std::shared_ptr<const data::DistributedBatchSampler> batches;
    std::optional<LoaderPosition> resume_at;  // set by resume(), used by the next pass
    int64_t epoch = 0;                        // of the pass in progress
    int64_t batch = -1;                       // the batch in progress (-1: none handed out yet)
  };
  std::vector<Loader> loaders;
  std::vector<size_t> active;  // indices into loaders, innermost pass last
};

class LoaderTracker::Observer : public data::PassObserver {
public:
  Observer(std::shared_ptr<State> state, size_t loader) : state_(std::move(state)), loader_(loader) {}

  data::PassStart pass_begins(data::PassStart planned) override {
    State::Loader& loader = state_->loaders[loader_];
    if (loader.resume_at.has_value()) {
      planned = {loader.resume_at->epoch, loader.resume_at->batch};
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
  state_->loaders.push_back({std::move(batches), std::nullopt});
  return std::make_shared<Observer>(state_, state_->loaders.size() - 1);
}

std::optional<LoaderTracker::Current> LoaderTracker::current() const {
  if (state_->active.empty()) return std::nullopt;
  const State::Loader& loader = state_->loaders[state_->active.back()];
  if (loader.batch < 0) return std::nullopt;  // the pass has not handed out a batch yet
  return Current{loader.batches.get(), loader.batch};
}

std::vector<std::optional<LoaderPosition>> LoaderTracker::positions() const {
  std::vector<std::optional<LoaderPosition>> result(state_->loaders.size());
  for (size_t index : state_->active) {
    const State::Loader& loader = state_->loaders[index];
    result[index] = LoaderPosition{loader.epoch, loader.batch + 1};
  }
  return result;
}

void LoaderTracker::resume(const std::vector<std::optional<LoaderPosition>>& positions) {
  SG_CHECK(positions.size() == state_->loaders.size(), "the state holds the positions of ", positions.size(),
           " prepared loader(s), but ", state_->loaders.size(), " were prepared; prepare the same loaders, in the ",
           "same order, before load_state");
  for (size_t index = 0; index < positions.size(); ++index) {  // check them all before changing any
    const std::optional<LoaderPosition>& position = positions[index];
    if (!position.has_value()) continue;
    const int64_t batches = state_->loaders[index].batches->size();
    SG_CHECK(position->epoch >= 0 && position->batch >= 0 && position->batch <= batches, "loader ", index,
             "'s position (epoch ", position->epoch, ", batch ", position->batch, ") is not within an epoch of ",
             batches, " batches; was it prepared with another batch size or data set?");
  }
  for (size_t index = 0; index < positions.size(); ++index)
    if (positions[index].has_value()) state_->loaders[index].resume_at = positions[index];
}

}  // namespace sg::dist
