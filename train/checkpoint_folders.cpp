#include "train/checkpoint_folders.h"

#include <exception>
#include <filesystem>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/numbered_checkpoints.h"

namespace sg::dist {

namespace fs = std::filesystem;

namespace {

// The Trainer's checkpoint-<step> folders of `output_dir`.
NumberedCheckpoints trainer_checkpoints(const std::string& output_dir) {
  return NumberedCheckpoints(output_dir, "checkpoint-", "Trainer");
}

}  // namespace

std::string checkpoint_folder(const std::string& output_dir, int64_t global_step) {
  return trainer_checkpoints(output_dir).folder(global_step);
}

std::optional<std::string> get_last_checkpoint(const std::string& output_dir) {
  return trainer_checkpoints(output_dir).newest();
}

void write_checkpoint_folder(Accelerator& accelerator, nn::Module& model, const std::string& output_dir,
                             int save_total_limit, const TrainerState& state, const LoopState& loop,
                             const data::DistributedBatchSampler& train_batches) {
  const NumberedCheckpoints checkpoints = trainer_checkpoints(output_dir);
  const int64_t step = state.global_step;
  const std::string trainer_state = state.to_json();
  const nlohmann::json loop_json{{"epoch", loop.next.epoch},
                                 {"batch", loop.next.batch},
                                 {"sample", train_batches.first_position(loop.next.batch)},
                                 {"total_loss", loop.total_loss},
                                 {"window_loss", loop.window_loss},
                                 {"last_logged_step", loop.last_logged_step}};
  // Note [Writing a checkpoint folder whole] in train/numbered_checkpoints.h
  std::string staging;
  accelerator.main_process_only("Trainer: saving a checkpoint", [&] { staging = checkpoints.begin_writing(step); });
  accelerator.save_state((fs::path(staging) / kCheckpointStateFile).string(), model,
                         {{"trainer_state", trainer_state}, {"trainer_loop", loop_json.dump()}});
  accelerator.main_process_only("Trainer: saving a checkpoint", [&] {
    write_file_atomically((fs::path(staging) / "trainer_state.json").string(),
                          [&](const ByteWriter& write) { write(trainer_state.data(), trainer_state.size()); });
    checkpoints.finish_writing(step, /*replace=*/true);
    checkpoints.remove_oldest(save_total_limit, state.best_model_checkpoint);
  });
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
  const std::string path = (fs::path(folder) / kCheckpointStateFile).string();
  SG_CHECK(fs::exists(path), "TrainingArguments: resume_from_checkpoint '", folder, "' holds no ", kCheckpointStateFile,
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
