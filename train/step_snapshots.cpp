#include "train/step_snapshots.h"

#include <filesystem>
#include <optional>

#include "train/numbered_checkpoints.h"

namespace sg::dist {

namespace fs = std::filesystem;

ProjectConfiguration step_snapshots(const std::string& snapshot, int keep) {
  return {.project_dir = snapshot + ".steps", .automatic_checkpoint_naming = true, .total_limit = keep};
}

std::string snapshot_to_resume(const Accelerator& accelerator, const std::string& snapshot) {
  std::optional<fs::path> step_state;
  if (accelerator.project_configuration().automatic_checkpoint_naming)
    if (const std::optional<std::string> folder = accelerator.last_checkpoint())
      step_state = fs::path(*folder) / kCheckpointStateFile;
  const bool has_snapshot = !snapshot.empty() && fs::exists(snapshot);
  // Both written by this run's steps: the later write is the later step (an epoch's snapshot
  // follows the step snapshot of its last step, after the evaluation).
  if (step_state && (!has_snapshot || fs::last_write_time(*step_state) > fs::last_write_time(snapshot)))
    return step_state->string();
  return has_snapshot ? snapshot : "";
}

}  // namespace sg::dist
