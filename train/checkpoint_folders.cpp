#include "train/checkpoint_folders.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace sg::dist {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckpointPrefix = "checkpoint-";
constexpr const char* kStateFile = "state.safetensors";

// The step of a folder named checkpoint-<step>; nullopt for any other name.
std::optional<int64_t> checkpoint_step(const fs::path& folder) {
  const std::string name = folder.filename().string();
  const std::string prefix = kCheckpointPrefix;
  if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 18)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) return std::nullopt;
  return std::stoll(digits);
}

// The checkpoint folders of `output_dir`, by step, oldest first.
std::vector<fs::path> sorted_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;  // a missing folder holds no checkpoint
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir, error))
    if (const std::optional<int64_t> step = checkpoint_step(entry.path()); step && entry.is_directory())
      found.emplace_back(*step, entry.path());
  std::sort(found.begin(), found.end());
  std::vector<fs::path> folders;
  for (auto& [step, folder] : found) folders.push_back(std::move(folder));
  return folders;
}

// Removes the oldest checkpoints beyond `limit` (0: none). The best one is moved next to the
// newest first, as HF's _sorted_checkpoints does, so that it stays.
void rotate_checkpoints(const std::string& output_dir, int limit, const std::string& best) {
  if (limit == 0) return;
  std::vector<fs::path> folders = sorted_checkpoints(output_dir);
  const auto kept = std::find_if(folders.begin(), folders.end(), [&](const fs::path& folder) {
    return !best.empty() && folder.filename() == fs::path(best).filename();
  });
  if (kept != folders.end() && kept + 1 != folders.end()) std::rotate(kept, kept + 1, folders.end() - 1);
  for (size_t i = 0; i + static_cast<size_t>(limit) < folders.size(); ++i) fs::remove_all(folders[i]);
}

// Runs `work` on the main process's checkpoint folders; a file system error becomes an sg::Error.
template <typename Work>
void in_checkpoint_folder(const fs::path& folder, Work&& work) {
  try {
    work();
  } catch (const fs::filesystem_error& error) {
    SG_FAIL("Trainer: writing checkpoint ", folder.string(), ": ", error.what());
  }
}

}  // namespace

std::string checkpoint_folder(const std::string& output_dir, int64_t global_step) {
  return (fs::path(output_dir) / (kCheckpointPrefix + std::to_string(global_step))).string();
}

std::optional<std::string> get_last_checkpoint(const std::string& output_dir) {
  const std::vector<fs::path> folders = sorted_checkpoints(output_dir);
  if (folders.empty()) return std::nullopt;
  return folders.back().string();
}

void write_checkpoint_folder(Accelerator& accelerator, nn::Module& model, const std::string& output_dir,
                             int save_total_limit, const TrainerState& state, const LoopState& loop,
                             const data::DistributedBatchSampler& train_batches) {
  const fs::path folder = checkpoint_folder(output_dir, state.global_step);
  const fs::path staging = fs::path(output_dir) / ("tmp-" + folder.filename().string());
  const std::string trainer_state = state.to_json();
  const nlohmann::json loop_json{{"epoch", loop.next.epoch},
                                 {"batch", loop.next.batch},
                                 {"sample", train_batches.first_position(loop.next.batch)},
                                 {"total_loss", loop.total_loss},
                                 {"window_loss", loop.window_loss},
                                 {"last_logged_step", loop.last_logged_step}};
  if (accelerator.is_main_process())
    in_checkpoint_folder(staging, [&] {
      fs::remove_all(staging);
      fs::create_directories(staging);
    });
  accelerator.save_state((staging / kStateFile).string(), model,
                         {{"trainer_state", trainer_state}, {"trainer_loop", loop_json.dump()}});
  if (accelerator.is_main_process())
    in_checkpoint_folder(folder, [&] {
      write_file_atomically((staging / "trainer_state.json").string(),
                            [&](const ByteWriter& write) { write(trainer_state.data(), trainer_state.size()); });
      fs::remove_all(folder);
      fs::rename(staging, folder);
      rotate_checkpoints(output_dir, save_total_limit, state.best_model_checkpoint);
    });
  accelerator.wait_for_everyone();
}

std::optional<std::string> checkpoint_to_resume(const TrainingArguments& args) {
  if (const auto* path = std::get_if<std::string>(&args.resume_from_checkpoint)) return *path;
  if (!std::get<bool>(args.resume_from_checkpoint)) return std::nullopt;
  std::optional<std::string> last = get_last_checkpoint(args.output_dir);
  SG_CHECK(last.has_value(), "TrainingArguments: resume_from_checkpoint is true, but output_dir '", args.output_dir,
           "' holds no checkpoint-<step> folder");
  return last;
}

TrainerCheckpoint read_checkpoint_folder(Accelerator& accelerator, nn::Module& model, const std::string& folder,
                                         const data::DistributedBatchSampler& train_batches) {
  const std::string path = (fs::path(folder) / kStateFile).string();
  SG_CHECK(fs::exists(path), "TrainingArguments: resume_from_checkpoint '", folder, "' holds no ", kStateFile,
           " (a checkpoint-<step> folder the Trainer wrote has one)");
  const optim::Metadata metadata = accelerator.load_state(path, model);
  SG_CHECK(metadata.count("trainer_state") == 1 && metadata.count("trainer_loop") == 1, "Trainer: ", path,
           " was not written by a dist::Trainer (its metadata has no trainer_state and trainer_loop)");
  // Runs `read` on the metadata entry `key`, naming the file and the entry in any error.
  const auto from_entry = [&](const char* key, const auto& read) {
    try {
      return read(metadata.at(key));
    } catch (const std::exception& error) {  // sg::Error and nlohmann::json's exceptions
      SG_FAIL("Trainer: ", path, ": metadata '", key, "': ", error.what());
    }
  };
  TrainerCheckpoint checkpoint{from_entry("trainer_state", TrainerState::from_json), {}};
  checkpoint.loop = from_entry("trainer_loop", [&](const std::string& text) {
    const nlohmann::json loop = nlohmann::json::parse(text);
    // A checkpoint saved before the world size was recorded has no sample (world_size 0).
    const LoaderPosition next{loop.at("epoch").get<int64_t>(), loop.at("batch").get<int64_t>(),
                              checkpoint.state.world_size, loop.value("sample", int64_t{0})};
    const auto last_logged_step = loop.at("last_logged_step").get<int64_t>();
    SG_CHECK(last_logged_step >= 0 && last_logged_step <= checkpoint.state.global_step, "last_logged_step ",
             last_logged_step, " is not a step from 0 to global_step ", checkpoint.state.global_step);
    return LoopState{
        {next.epoch, batch_to_resume(train_batches, next, accelerator.gradient_accumulation_steps(), "the next batch")},
        loop.at("total_loss").get<double>(),
        loop.at("window_loss").get<double>(),
        last_logged_step};
  });
  return checkpoint;
}

}  // namespace sg::dist
