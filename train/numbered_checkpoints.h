#pragma once
// defines: NumberedCheckpoints, kCheckpointStateFile — the checkpoint folders <parent>/<prefix><n>
//          a run keeps: listing them oldest first, writing one whole, and removing the oldest
//          beyond a limit. The Trainer's checkpoint-<step> folders (train/checkpoint_folders.h) and
//          the Accelerator's checkpoints/checkpoint_<i> (ProjectConfiguration in
//          train/accelerator.h) are both kept this way.
//
// Note [Writing a checkpoint folder whole]
// A folder is written under its staging name tmp-<prefix><n> and renamed to <prefix><n> once
// every file in it is complete, so a crash while saving leaves at most a tmp- folder, which
// list() never returns: resuming from the newest never picks a partial checkpoint. The oldest
// folders are removed only after that rename succeeded, so a save that fails (a full disk, a
// file in the way) leaves every earlier checkpoint in place, the newest good one included. Only
// folders count: a file named <prefix><n> is no checkpoint.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sg::dist {

// The Accelerator's state file inside a checkpoint folder (Accelerator::save_state).
inline constexpr const char* kCheckpointStateFile = "state.safetensors";

class NumberedCheckpoints {
public:
  // The folders <parent>/<prefix><n>; `owner` begins the messages of file system errors.
  NumberedCheckpoints(std::string parent, std::string prefix, std::string owner);

  std::string folder(int64_t number) const;  // <parent>/<prefix><number>
  // The checkpoint folders there, with their numbers, smallest number first (none when parent is missing).
  std::vector<std::pair<int64_t, std::string>> list() const;
  std::optional<std::string> newest() const;  // the folder with the largest number

  // Removes what a failed attempt left at tmp-<prefix><number> and creates it empty; returns it.
  std::string begin_writing(int64_t number) const;
  // Renames the staged folder to folder(number). With `replace`, an existing folder(number) is
  // removed first (the Trainer saving a step again); without, anything there is an error.
  void finish_writing(int64_t number, bool replace) const;
  // Removes the folders with the smallest numbers beyond `limit` (0: none). `kept`, when it is one
  // of them, stays (moved next to the newest first, as Hugging Face's _sorted_checkpoints does).
  void remove_oldest(int limit, const std::string& kept = "") const;

private:
  std::string staging(int64_t number) const;
  template <typename Work>
  void on_file_system(const std::string& path, Work&& work) const;

  std::string parent_;
  std::string prefix_;
  std::string owner_;
};

}  // namespace sg::dist
