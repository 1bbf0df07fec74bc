#pragma once
// defines: dist::Accelerator — one object that makes a training script run unchanged on one
//          process or on many (in the spirit of Hugging Face Accelerate).
//
//   dist::Accelerator accelerator;                      // joins the group when run under sgrun
//   auto model = accelerator.prepare(models::CNN());     // DDP-wrapped when there are ranks
//   optim::Adam optimizer(model->parameters());
//   accelerator.prepare(optimizer);                      // saved with save_state
//   auto loader = accelerator.prepare(dataset, {.batch_size = 64, .shuffle = true});  // this rank's share
//   for (const data::Batch& batch : loader) {
//     optimizer.zero_grad();
//     accelerator.backward(loss_of((*model)(batch.input), batch.target));
//     optimizer.step();
//   }
//   accelerator.print("done");                           // main rank only
#include <memory>
#include <sstream>
#include <string>

#include "data/dataloader.h"
#include "dist/ddp.h"
#include "nn/module.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace sg::dist {

struct AcceleratorOptions {
  DDPOptions ddp = {};
  bool sync_batchnorm = false;  // convert BatchNorm layers to SyncBatchNorm in prepare(model)
};

class Accelerator {
public:
  // Under a launcher (WORLD_SIZE in the environment) initialises the default process group
  // from the environment, unless the program already did; otherwise runs as one process.
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();  // destroys the group if it created it
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  int process_index() const;        // the global rank
  int local_process_index() const;  // the rank on this machine
  int num_processes() const;
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }

  // The model to train: wrapped in DistributedDataParallel when there is more than one process.
  std::shared_ptr<nn::Module> prepare(std::shared_ptr<nn::Module> model);
  // Registers the optimizer (and scheduler) whose state save_state / load_state carry.
  optim::Optimizer& prepare(optim::Optimizer& optimizer);
  optim::LRScheduler& prepare(optim::LRScheduler& scheduler);
  // A loader over this process's share of `dataset`: a DistributedSampler (shuffled by
  // options.seed + epoch when options.shuffle) replaces the loader's own order.
  data::DataLoader prepare(std::shared_ptr<const data::Dataset> dataset, data::DataLoaderOptions options);

  void backward(const Tensor& loss);
  // clip_grad_norm_ over `params`, returning the total norm (gradients are identical on every
  // rank after backward, so every rank clips alike).
  double clip_grad_norm_(const TensorList& params, double max_norm);

  // `local` holds this rank's per-example results of one pass over a loader from prepare(),
  // in loader order; returns every rank's results in the data set's sampler order, without the
  // examples the sampler repeated to pad the ranks to equal shares — so metrics are over exactly
  // `dataset_size` examples. A collective: every rank calls it.
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

  // The model inside the DDP wrapper (or the model itself).
  nn::Module& unwrap_model(nn::Module& model) const;

  // One safetensors file, written atomically by the main process: the unwrapped model's
  // state, the prepared optimizer's and scheduler's, the default generator's state and the
  // caller's `metadata` (epoch, step, ...). One file rather than Accelerate's directory, so a
  // crash while saving leaves the previous snapshot whole (docs/decisions.md).
  void save_state(const std::string& path, nn::Module& model, optim::Metadata metadata = {});
  // Restores what save_state wrote, on every process; returns the caller's metadata.
  optim::Metadata load_state(const std::string& path, nn::Module& model);

private:
  void print_line(const std::string& line) const;

  AcceleratorOptions options_;
  bool owns_group_ = false;
  optim::Optimizer* optimizer_ = nullptr;
  optim::LRScheduler* scheduler_ = nullptr;
};

}  // namespace sg::dist
