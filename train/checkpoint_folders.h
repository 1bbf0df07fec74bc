#pragma once
// defines: LoopPosition, LoopState, TrainerCheckpoint, checkpoint_folder, get_last_checkpoint,
//          write_checkpoint_folder, checkpoint_to_resume, read_checkpoint_folder — the Trainer's
//          checkpoint-<step> folders in output_dir: their names, writing one whole, keeping
//          save_total_limit of them, and finding and reading back the one to resume from
//          (docs/trainer.md, "Checkpoints and resume").
//
// Note [Checkpoints and resuming]
// A checkpoint is the folder <output_dir>/checkpoint-<global_step>/ with the Accelerator's state
// file (model, optimizer, schedule, RNG, loader position; written atomically) whose metadata
// also holds the TrainerState and the loop's own figures (the next batch, the loss sums), plus a
// readable trainer_state.json. The main process writes it as tmp-checkpoint-<step>/ and renames
// it, so a crash never leaves a partial checkpoint-<step>/ for resume_from_checkpoint = true to
// pick (Note [Writing a checkpoint folder whole] in train/numbered_checkpoints.h). The next batch is stored by the
// trainer too: a checkpoint taken at an epoch's end, outside the loop over the loader, carries no loader position in
// the Accelerator's state, yet must resume where the loop stopped; train() skips the batches itself
// (DataLoader::skip_first_batches, what load_state would have done). The order of an epoch depends
// only on the seed and the epoch, so the resumed run trains on exactly the batches the
// uninterrupted one would have, in the same accumulation windows. The next batch is stored with
// its global sample position and the TrainerState with the world size, so a run on another
// number of processes (or batch size) goes on from the same example, or is refused when no batch
// of it begins there (Note [Resuming on another world size] in train/loader_tracker.h).
#include <cstdint>
#include <optional>
#include <string>

#include "data/distributed_batch_sampler.h"
#include "nn/module.h"
#include "train/accelerator.h"
#include "train/trainer_callback.h"
#include "train/training_args.h"

namespace sg::dist {

// The next batch the training loop trains on.
struct LoopPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // its index in that epoch
};

// What a checkpoint holds of the training loop besides the Accelerator's state: where it resumes
// and its loss sums (Note [The logged loss] in train/trainer.cpp).
struct LoopState {
  LoopPosition next = {};
  double total_loss = 0;
  double window_loss = 0;  // the steps since the last log, averaged over the processes
  int64_t last_logged_step = 0;
};

// A checkpoint as read back: the TrainerState it was saved with, and the loop's figures.
struct TrainerCheckpoint {
  TrainerState state;
  LoopState loop;
};

// <output_dir>/checkpoint-<global_step>: where write_checkpoint_folder puts that step's checkpoint.
std::string checkpoint_folder(const std::string& output_dir, int64_t global_step);

// The checkpoint-<step> folder of `output_dir` with the largest step, if any (HF's get_last_checkpoint).
std::optional<std::string> get_last_checkpoint(const std::string& output_dir);

// Writes checkpoint_folder(output_dir, state.global_step) as Note [Checkpoints and resuming]
// says — the Accelerator's state of `model` with `state` and `loop` in its metadata (loop.next a
// batch of `train_batches`, the training loader's), and trainer_state.json — then removes the oldest checkpoints beyond
// `save_total_limit` (0: none), keeping state.best_model_checkpoint. Every process calls it, since the state file is
// written collectively; it returns once the folder is in place. A file system error is an sg::Error naming the folder.
void write_checkpoint_folder(Accelerator& accelerator, nn::Module& model, const std::string& output_dir,
                             int save_total_limit, const TrainerState& state, const LoopState& loop,
                             const data::DistributedBatchSampler& train_batches);

// The folder args.resume_from_checkpoint names: its path, or for `true` the newest
// checkpoint-<step> of args.output_dir (an sg::Error when there is none); nullopt for `false`.
std::optional<std::string> checkpoint_to_resume(const TrainingArguments& args);

// Restores what `folder`'s state file holds into `model` and what `accelerator` has prepared
// (optimizer, schedule, RNG, loader positions), on every process, and returns the TrainerState
// and loop figures saved with them, loop.next as a batch of `train_batches` (at the same global
// sample when the checkpoint was saved by another number of processes). An sg::Error names the
// folder or the file when it holds no state file, or one a dist::Trainer did not write, and the
// file, the entry and the field of a step or position out of range or not resumable here.
TrainerCheckpoint read_checkpoint_folder(Accelerator& accelerator, nn::Module& model, const std::string& folder,
                                         const data::DistributedBatchSampler& train_batches);

}  // namespace sg::dist
