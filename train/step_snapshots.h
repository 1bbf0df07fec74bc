#pragma once
// defines: step_snapshots, snapshot_to_resume — the apps' mid-epoch snapshots: every N optimizer
//          steps the Accelerator's numbered checkpoints (ProjectConfiguration) in <snapshot>.steps/,
//          the newest K kept, beside the per-epoch snapshot file; a restarted run resumes from
//          whichever of them was written last (docs/accelerator.md, "Checkpoints by number").
#include <string>

#include "train/accelerator.h"

namespace sg::dist {

// The ProjectConfiguration of the step snapshots that go with the per-epoch snapshot file
// `snapshot`: <snapshot>.steps/checkpoints/checkpoint_<i>, the newest `keep` kept (0: all).
ProjectConfiguration step_snapshots(const std::string& snapshot, int keep);

// The state file a restarted run resumes from: `snapshot` or the newest step snapshot of the
// accelerator's ProjectConfiguration (when it has automatic_checkpoint_naming), whichever was
// written last; "" when there is neither.
std::string snapshot_to_resume(const Accelerator& accelerator, const std::string& snapshot);

}  // namespace sg::dist
