#pragma once
// defines: SummaryWriter, SummaryWriterOptions — TensorBoard event files, written the way
//          torch.utils.tensorboard.SummaryWriter writes them.
//
//   data::SummaryWriter writer("runs/cnn");   // runs/cnn/events.out.tfevents.<time>.<host>.<pid>.<n>
//   writer.add_scalar("loss/train", loss, step);
//   writer.add_scalars("loss", {{"train", 0.31}, {"test", 0.35}}, epoch);  // runs runs/cnn/loss_train, loss_test
//   writer.add_image("samples", image, step);  // CHW: f32 in [0, 1], or u8
//   writer.add_text("config", "lr 0.005, batch 64", 0);
//   // then: tensorboard --logdir runs
//
// Under dist::Accelerator, init_trackers / log / get_tracker give a writer that only the main
// process writes with (docs/tensorboard.md).
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace sg::data {

struct SummaryWriterOptions {
  // Events reach the file at least this often, from a background thread, even while the program
  // writes nothing new (torch's flush_secs; Note [When events reach the file] in summary_writer.cpp).
  double flush_secs = 120;
  std::string filename_suffix = "";  // appended to each event file's name (torch's filename_suffix)
};

class SummaryWriter {
public:
  // A writer that writes nothing: every call returns at once. What dist::Accelerator hands the
  // processes other than the main one.
  SummaryWriter();
  // Creates `log_dir` (and its parents) when missing and starts a new event file in it, whose first
  // record is the file version "brain.Event:2". An sg::Error names the directory it cannot create.
  explicit SummaryWriter(const std::string& log_dir, SummaryWriterOptions options = {});
  ~SummaryWriter();  // close(); a write error at this point is printed to stderr, not thrown
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  bool enabled() const { return state_ != nullptr; }
  const std::string& log_dir() const;  // empty for a writer that writes nothing
  std::string file_path() const;       // the event file of log_dir itself

  // One point of the curve `tag`, stored as f32 (a Summary's simple_value, as torch stores it).
  void add_scalar(const std::string& tag, double value, int64_t step);
  // One point of each curve in `values`, drawn in one chart as torch's add_scalars draws it: each
  // key is a run of its own, the sub-directory <log_dir>/<main_tag with '/' as '_'>_<key>, and each
  // point is tagged `main_tag` in its run.
  void add_scalars(const std::string& main_tag, const std::map<std::string, double>& values, int64_t step);
  // A CHW image (C = 1, 3 or 4), PNG-encoded: floating-point values are scaled by 255, u8 values
  // taken as they are; both are clipped to [0, 255] and truncated, as torch does. One channel is
  // stored as grey RGB, as torch stores it.
  void add_image(const std::string& tag, const Tensor& image, int64_t step);
  // Text (Markdown in TensorBoard's Text tab), under the tag "<tag>/text_summary" as torch names it.
  void add_text(const std::string& tag, const std::string& text, int64_t step);

  // Writes what is buffered to the files now.
  void flush();
  // Flushes and closes every file and stops the flushing thread; adding anything afterwards is an
  // sg::Error. Idempotent.
  void close();

private:
  struct State;  // the open files, the lock and the flushing thread (summary_writer.cpp)
  std::unique_ptr<State> state_;
};

}  // namespace sg::data
