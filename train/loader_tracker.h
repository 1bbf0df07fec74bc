#pragma once
// defines: dist::LoaderTracker, LoaderPosition — which batch of which loader prepared by the
//          Accelerator the program is on (Accelerate's GradientState): the batch that
//          gather_for_metrics and gradient accumulation work out their rows and sync steps from,
//          and the positions save_state records and load_state resumes.
//
// Each prepared loader gets an observer (Note [Following a loader's passes] in
// data/dataloader.h). Passes in progress form a stack: an evaluation loop inside a training loop
// is the innermost, and current() is its batch until it ends. The observers share the tracker's
// state, so a loader that outlives its Accelerator still reports somewhere valid.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataloader.h"
#include "data/distributed_batch_sampler.h"

namespace sg::dist {

// Where a loader's next batch is: batch `batch` of epoch `epoch` (batch may be the epoch's
// size: the pass is over, and resuming there runs an empty pass).
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
};

class LoaderTracker {
public:
  LoaderTracker();

  // Registers a loader with these batches; returns the observer its options must carry.
  std::shared_ptr<data::PassObserver> track(std::shared_ptr<const data::DistributedBatchSampler> batches);

  // The batch of the innermost pass in progress, or nullopt outside every prepared loader's loop.
  struct Current {
    const data::DistributedBatchSampler* batches;
    int64_t batch;
  };
  std::optional<Current> current() const;

  // Per loader, in the order they were tracked: the position after the batch in progress, or
  // nullopt for a loader between passes.
  std::vector<std::optional<LoaderPosition>> positions() const;
  // The next pass of each loader with a position begins there instead of where it would have.
  void resume(const std::vector<std::optional<LoaderPosition>>& positions);

private:
  struct State;
  class Observer;
  std::shared_ptr<State> state_;
};

}  // namespace sg::dist
