#pragma once
// defines: StepSnapshotFlags — train_cnn's and train_resnet's --save-every-steps N --keep K: a
//          snapshot every N optimizer steps, inside the epoch, beside the --snapshot file
//          (dist::step_snapshots in train/step_snapshots.h; docs/accelerator.md, "Checkpoints by number").
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "train/step_snapshots.h"

struct StepSnapshotFlags {
  int64_t save_every_steps = 0;  // 0: a snapshot per epoch only
  int keep = 2;                  // step snapshots kept (0: all)

  void add_to(CLI::App& app) {
    app.add_option("--save-every-steps", save_every_steps,
                   "Also snapshot every N optimizer steps, inside the epoch, into --snapshot's FILE.steps/checkpoints/"
                   "checkpoint_<i>; a restarted run resumes from the newest snapshot of either kind (0: per epoch "
                   "only)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--keep", keep, "Step snapshots kept, the oldest removed (0: all)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
  }

  // The Accelerator's ProjectConfiguration for them, beside `snapshot` (the --snapshot FILE they need).
  sg::dist::ProjectConfiguration project(const std::string& snapshot) const {
    if (save_every_steps == 0) return {};
    SG_CHECK(!snapshot.empty(), "--save-every-steps writes beside the --snapshot file: give --snapshot FILE too");
    return sg::dist::step_snapshots(snapshot, keep);
  }

  bool due(int64_t step) const { return save_every_steps > 0 && step % save_every_steps == 0; }
};
