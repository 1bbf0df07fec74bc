#pragma once
// defines: dist::LoaderTracker, LoaderPosition, position_of, ResumePoint, pass_to_resume,
//          batch_to_resume — which batch of
//          which loader prepared by the Accelerator the program is on (Accelerate's
//          GradientState): the batch that gather_for_metrics and gradient accumulation work out
//          their rows and sync steps from, and the positions save_state records and load_state
//          resumes, on the same or another number of processes.
//
// Each prepared loader gets an observer (Note [Following a loader's passes] in
// data/dataloader.h). Passes in progress form a stack: an evaluation loop inside a training loop
// is the innermost, and current() is its batch until it ends. The observers share the tracker's
// state, so a loader that outlives its Accelerator still reports somewhere valid.
//
// Note [Resuming on another world size]
// A position is recorded with the world size W that took it and its global sample position G:
// how many positions of the epoch's list (Note [DistributedSampler padding]) the batches before
// it held over every rank, DistributedBatchSampler::first_position. List position p holds
// order[p % N] of one permutation of the N examples drawn from seed + epoch, whatever W is; W
// only decides where the list ends (the padding to a multiple of W). So G names the same place in
// the epoch for any world size and batch size. In the middle of an epoch G = b * B * W < N (the
// rank's rows before batch b are fewer than its share, ceil(N / W)), so nothing behind it is
// padding; once the pass is over G is the whole list, >= N.
// A run of W' processes with batches of B' resumes at G as follows:
//   - G >= N: the saved pass was over; so is this one (its batch is size()).
//   - G a multiple of B' * W': at batch G / (B' * W'). Its batches hold positions G, G + 1, ...
//     of the same list: exactly the examples the saved run had not reached, then this world
//     size's own padding (the duplicates its W' adds, or nothing with drop_last, which drops the
//     tail as any epoch of this run would). The saved run's padding lay beyond G, unreached. The
//     rest of the epoch is then batch for batch what an uninterrupted run of W' would train on.
//   - otherwise no batch of this run begins at G (or the position moves, to another W or B, onto
//     a batch inside a window of gradient_accumulation_steps batches, whose loss weights count
//     batches before it that this run never had): the rest of the epoch, positions G .. N - 1,
//     is dealt anew to the W' processes, DistributedSampler style (Note [Dealing the rest of an
//     epoch] in data/distributed_sampler.h), and batched by B' from its first batch, a window
//     beginning there. Every example the saved run had not reached is trained on exactly once,
//     plus the few duplicates that pad the rest to a multiple of W'. The next epoch is sharded
//     as usual. Under the loader's drop_last, when the rest leaves each process a share that is
//     not a whole number of batches, the last batch would be dropped with examples nobody trained
//     on: refused, naming both world sizes and the position. (The Trainer's own loop skips its
//     batches itself and takes only the first two cases: batch_to_resume.)
// A position saved before the world size was recorded (world_size 0) resumes at its batch number,
// as it did then: right only on the world size and batch size it was saved with.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "data/distributed_batch_sampler.h"

namespace sg::dist {

// Where a loader's next batch is: batch `batch` of epoch `epoch` (batch may be the epoch's
// size: the pass is over, and resuming there runs an empty pass) of `world_size` processes, at
// global sample position `sample` (Note [Resuming on another world size]).
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  int world_size = 0;  // 0: not recorded (saved before it was); then `sample` means nothing
  int64_t sample = 0;
};

// The position of batch `batch` of epoch `epoch` of `batches`, with this process's world size.
LoaderPosition position_of(const data::DistributedBatchSampler& batches, int64_t epoch, int64_t batch);

// Where a pass resumes: batch `batch` of epoch `epoch`, of the loader's own batches or, when
// `batches` is set, of the rest of that epoch dealt anew (Note [Resuming on another world size]).
struct ResumePoint {
  int64_t epoch = 0;
  int64_t batch = 0;
  std::shared_ptr<const data::DistributedBatchSampler> batches = {};
};

// Where a pass of `batches` resumes at `position`, with `accumulation_steps` micro-batches per
// optimizer step. An sg::Error beginning with `name` names the field of a position out of range,
// or both world sizes and the position when this run cannot resume there without losing examples.
ResumePoint pass_to_resume(const data::DistributedBatchSampler& batches, const LoaderPosition& position,
                           int accumulation_steps, const std::string& name);

// The batch of `batches` itself at which `position` resumes (the first two cases of Note
// [Resuming on another world size]); an sg::Error naming both world sizes and positions when
// none begins there.
int64_t batch_to_resume(const data::DistributedBatchSampler& batches, const LoaderPosition& position,
                        int accumulation_steps, const std::string& name);

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
  // The next pass of each loader with a position begins there (pass_to_resume) instead of
  // where it would have; with an error for any of them, none changes.
  void resume(const std::vector<std::optional<LoaderPosition>>& positions, int accumulation_steps);
  // Where resume() moved the next pass of the loader with these batches, or nullopt when it did not
  // (the pass starts where the loader itself says).
  std::optional<ResumePoint> pending_resume(const data::BatchSampler& batches) const;

private:
  struct State;
  class Observer;
  std::shared_ptr<State> state_;
};

}  // namespace sg::dist
