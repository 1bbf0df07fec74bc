#pragma once
// defines: dist::Accelerator — one object that makes a training script run unchanged on one
//          process or on many (in the spirit of Hugging Face Accelerate).
//
//   dist::Accelerator accelerator;                      // joins the group when run under sgrun
//   auto model = accelerator.prepare(models::CNN());     // on accelerator.device(), DDP-wrapped when there are ranks
//   optim::Adam optimizer(model->parameters());
//   accelerator.prepare(optimizer);                      // saved with save_state
//   auto loader = accelerator.prepare(dataset, {.batch_size = 64, .shuffle = true});  // this rank's share
//   for (const data::Batch& batch : loader) {            // already on accelerator.device()
//     optimizer.zero_grad();
//     Tensor loss;
//     {
//       const auto autocast = accelerator.autocast();     // mixed precision, when asked for
//       loss = loss_of((*model)(batch.input), batch.target);
//     }
//     accelerator.backward(loss);                        // scaled when f16
//     accelerator.step(optimizer);                       // skipped when the f16 gradients overflowed
//   }
//   accelerator.print("done");                           // main rank only
//
// Experiment tracking, as Accelerate's with log_with="tensorboard" (docs/tensorboard.md):
//   accelerator.init_trackers("runs/cnn");               // a TensorBoard writer on the main rank
//   accelerator.log({{"loss/train", loss.item()}}, step);  // every rank may call it; only the main one writes
//   accelerator.end_training();
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "data/dataloader.h"
#include "data/summary_writer.h"
#include "dist/ddp.h"
#include "nn/module.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace sg::dist {

struct AcceleratorOptions {
  DDPOptions ddp = {};
  bool sync_batchnorm = false;  // convert BatchNorm layers to SyncBatchNorm in prepare(model)
  // "no", "f16" (autocast to f16 and a GradScaler) or "bf16" (autocast only: bf16 has f32's
  // range, so gradients do not underflow and need no scaling). docs/amp.md.
  std::string mixed_precision = "no";
  // Where the model, the batches and the gradient all-reduce live. "auto": the GPU of this
  // process's LOCAL_RANK when CUDA is available, else the CPU (when the program joined a process
  // group itself: that group's device); "cpu"; "cuda": the GPU of LOCAL_RANK, an error naming the
  // reason when there is none. One GPU per process: sgrun --nproc-per-node N on N GPUs.
  std::string device = "auto";
};

class Accelerator {
public:
  // Under a launcher (sgrun / torchrun, srun or mpirun variables in the environment:
  // dist/environment.h) initialises the default process group from the environment, unless the
  // program already did — over NCCL when the device is a GPU, over Gloo on the CPU; otherwise
  // runs as one process.
  Accelerator();
  explicit Accelerator(const AcceleratorOptions& options);
  ~Accelerator();  // destroys the group if it created it
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  int process_index() const;        // the global rank
  int local_process_index() const;  // the rank on this machine
  int num_processes() const;
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }
  // Where prepare() puts the model and the loaders their batches (AcceleratorOptions::device).
  Device device() const { return device_; }

  // The model to train, moved to device() (parameters keep their identity, so an optimizer made
  // before or after sees the moved ones): wrapped in DistributedDataParallel when there is more
  // than one process.
  std::shared_ptr<nn::Module> prepare(std::shared_ptr<nn::Module> model);
  // Registers the optimizer (and scheduler) whose state save_state / load_state carry.
  optim::Optimizer& prepare(optim::Optimizer& optimizer);
  optim::LRScheduler& prepare(optim::LRScheduler& scheduler);
  // A loader over this process's share of `dataset`: a DistributedSampler (shuffled by
  // options.seed + epoch when options.shuffle) replaces the loader's own order, and its batches
  // arrive on device() (options.device is set to it; options.pin_memory stages them in
  // page-locked memory first).
  data::DataLoader prepare(std::shared_ptr<const data::Dataset> dataset, data::DataLoaderOptions options);

  // The autocast region of the chosen mixed precision (a region that casts nothing for "no").
  amp::AutocastGuard autocast() const;
  // loss.backward(), with the loss scaled first under f16.
  void backward(const Tensor& loss);
  // optimizer.step(), through the scaler under f16: returns false when the step was skipped
  // because a gradient was inf or NaN (on any rank), then adjusts the scale.
  bool step(optim::Optimizer& optimizer);
  // clip_grad_norm_ over `params`, returning the total norm. Under f16 the prepared optimizer's
  // gradients are unscaled first, so the threshold applies to the true gradients. Gradients are
  // identical on every rank after backward, so every rank clips alike.
  double clip_grad_norm_(const TensorList& params, double max_norm);
  const amp::GradScaler& scaler() const { return scaler_; }

  // `local` holds this rank's per-example results of one pass over a loader from prepare(),
  // in loader order; returns every rank's results in the data set's sampler order, without the
  // examples the sampler repeated to pad the ranks to equal shares — so metrics are over exactly
  // `dataset_size` examples — on local's device. A collective: every rank calls it.
  Tensor gather_for_metrics(const Tensor& local, int64_t dataset_size);
  void wait_for_everyone();

  // Prints a line on the main process only.
  template <typename... Args>
  void print(const Args&... args) const {
    if (!is_main_process()) return;
    std::ostringstream line;
    (line << ... << args);
    print_line(line.str());
  }

  // Experiment tracking (Accelerate's init_trackers / log / get_tracker / end_training, with
  // TensorBoard as the tracker). Every rank may make these calls alike: only the main process
  // writes, so a run under sgrun leaves one set of event files, not one per rank.
  // Opens a data::SummaryWriter on `log_dir` on the main process (Accelerate's logging_dir/
  // project_name in one path); on the others nothing. An sg::Error names a directory it cannot create.
  void init_trackers(const std::string& log_dir, data::SummaryWriterOptions options = {});
  // Writes each value as a scalar point at `step` (data::SummaryWriter::add_scalar).
  void log(const std::map<std::string, double>& values, int64_t step);
  // The writer itself, for images, text and add_scalars (Accelerate's get_tracker("tensorboard",
  // unwrap=True)): the main process's, or, on the other processes and before init_trackers, one
  // whose every call returns at once.
  data::SummaryWriter& get_tracker() { return *tracker_; }
  // Flushes and closes the event files (the destructor does too, printing rather than throwing
  // a write error).
  void end_training();

  // The model inside the DDP wrapper (or the model itself).
  nn::Module& unwrap_model(nn::Module& model) const;

  // One safetensors file, written atomically by the main process: the unwrapped model's
  // state, the prepared optimizer's and scheduler's, the scaler's, the default generator's and the
  // caller's `metadata` (epoch, step, ...). One file rather than Accelerate's directory, so a
  // crash while saving leaves the previous snapshot whole (docs/decisions.md).
  void save_state(const std::string& path, nn::Module& model, optim::Metadata metadata = {});
  // Restores what save_state wrote, on every process; returns the caller's metadata.
  optim::Metadata load_state(const std::string& path, nn::Module& model);

private:
  void print_line(const std::string& line) const;

  AcceleratorOptions options_;
  Device device_ = Device::cpu();
  bool owns_group_ = false;
  amp::GradScaler scaler_;
  optim::Optimizer* optimizer_ = nullptr;
  optim::LRScheduler* scheduler_ = nullptr;
  std::unique_ptr<data::SummaryWriter> tracker_ = std::make_unique<data::SummaryWriter>();
};

}  // namespace sg::dist
