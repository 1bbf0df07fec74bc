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
//     const auto accumulation = accelerator.accumulate(*model);  // with gradient_accumulation_steps
//     Tensor loss;
//     {
//       const auto autocast = accelerator.autocast();     // mixed precision, when asked for
//       loss = loss_of((*model)(batch.input), batch.target);
//     }
//     accelerator.backward(loss);                        // weighted (accumulation, uneven batches); scaled when f16
//     accelerator.step(optimizer);                       // skipped when the f16 gradients overflowed
//     accelerator.zero_grad(optimizer);                  // both only on an accumulation's last micro-batch
//   }
//   accelerator.print("done");                           // main rank only
//
// Evaluation, batch by batch, with every rank's results gathered (docs/accelerator.md):
//   for (const data::Batch& batch : test_loader) {
//     const TensorList gathered = accelerator.gather_for_metrics({predictions, batch.target});
//     ...                                                // exactly the test set: padding dropped
//   }
//
// Experiment tracking, as Accelerate's with log_with="tensorboard" (docs/tensorboard.md):
//   accelerator.init_trackers("runs/cnn");               // a TensorBoard writer on the main rank
//   accelerator.log({{"loss/train", loss.item()}}, step);  // every rank may call it; only the main one writes
//   accelerator.end_training();
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "data/dataloader.h"
#include "dist/ddp.h"
#include "dist/run_fingerprint.h"
#include "log/summary_writer.h"
#include "nn/module.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/data_parallel_check.h"
#include "train/loader_tracker.h"
#include "train/numbered_checkpoints.h"

namespace sg::dist {

// Where save_state() and load_state() without a path keep the run's checkpoints (Accelerate's
// ProjectConfiguration; docs/accelerator.md, "Checkpoints by number").
struct ProjectConfiguration {
  std::string project_dir;  // the checkpoints go to <project_dir>/checkpoints
  // save_state() writes <project_dir>/checkpoints/checkpoint_<i>/, i one more than the largest
  // there (0 for the first), so the numbers go on counting when a run restarts; load_state()
  // loads the largest. Without it, save_state and load_state need a path.
  bool automatic_checkpoint_naming = false;
  // How many checkpoint_<i> folders save_state() keeps: the oldest beyond it are removed once a
  // new one is in place (0: all are kept).
  int total_limit = 0;
};

struct AcceleratorOptions {
  ProjectConfiguration project_config = {};
  DDPOptions ddp = {};
  bool sync_batchnorm = false;  // convert BatchNorm layers to SyncBatchNorm in prepare(model)
  // "no", "f16" (autocast to f16 and a GradScaler) or "bf16" (autocast only: bf16 has f32's
  // range, so gradients do not underflow and need no scaling). docs/amp.md.
  std::string mixed_precision = "no";
  // Under f16 only: the loss scaler's diagnostics (amp/scaler_diagnostics.h, docs/amp.md). A skipped
  // step prints which parameters' gradients held inf/NaN and whether they began on this rank
  // (DDPOptions::find_nonfinite_origin is switched on for the models prepare() wraps);
  // scaler().diagnostics() holds the underflow fractions and the scale history; end_training()
  // prints which parameters would be safer in f32 or bf16.
  bool amp_diagnostics = false;
  // The communication hook of the models prepare() wraps in DDP (Accelerate's
  // DistributedDataParallelKwargs comm_hook): "no" (DDP's own f32 average), "allreduce" (the same,
  // through a hook), "fp16" or "bf16" (gradients sent in 16 bits: half the bytes, rounded;
  // dist/default_hooks.h, docs/ddp.md).
  std::string comm_hook = "no";
  // ZeRO stage 2's gradients: prepare(optimizer) of a ZeroRedundancyOptimizer registers its
  // reduce_scatter_gradients_hook on the models prepare() wrapped in DDP (so comm_hook must be
  // "no"), and clip_grad_norm_ goes through its clip. Only with more than one process; there, the
  // optimizer must be a ZeroRedundancyOptimizer. Note [ZeRO-2: each rank receives only its shard's
  // gradients] in train/zero_gradient_shards.cpp.
  bool zero_shard_gradients = false;
  // Where the model, the batches and the gradient all-reduce live. "auto": the GPU of this
  // process's LOCAL_RANK when CUDA is available, else the CPU (when the program joined a process
  // group itself: that group's device); "cpu"; "cuda": the GPU of LOCAL_RANK, an error naming the
  // reason when there is none. One GPU per process: sgrun --nproc-per-node N on N GPUs.
  std::string device = "auto";
  // Micro-batches whose gradients add up before one optimizer step (Accelerate's
  // gradient_accumulation_steps), inside accumulate(model): docs/accelerator.md.
  int gradient_accumulation_steps = 1;
  // prepare(dataset, options): options.batch_size is the batch of all processes together, split
  // between them (it must be a multiple of num_processes()), rather than each process's own.
  bool split_batches = false;
  // false: the loaders hand out only the data set's examples, so the last batches are uneven and
  // a rank that ran out runs join batches that weigh nothing (Note [Uneven batches] in
  // data/distributed_batch_sampler.h); true: torch's padded, equal batches.
  bool even_batches = true;
};

// The device an Accelerator built with AcceleratorOptions::device = `choice` trains on in this
// process, for a program that chooses its other settings by device before building one.
Device accelerator_device(const std::string& choice);

// How a program's start line ends "<B> images per process and ...": "step", or "micro-batch, K
// micro-batches per step" when K gradient_accumulation_steps make a step.
std::string batch_note(int gradient_accumulation_steps);

// Seeds the default generator with `seed`, or with seed + the process's rank when
// `device_specific` (Accelerate's set_seed; each rank then draws differently).
void set_seed(uint64_t seed, bool device_specific = false);

class Accelerator {
public:
  // Under a launcher (sgrun / torchrun, srun or mpirun variables in the environment:
  // dist/environment.h) initialises the default process group from the environment, unless the
  // program already did — over NCCL when the device is a GPU, over Gloo on the CPU; otherwise
  // runs as one process.
  // On several processes, the ranks then compare their options, and later each prepared
  // optimizer and loader (Note [Ranks agree on the run's settings] in dist/run_fingerprint.h):
  // ranks that differ stop, all of them, with an sg::Error naming the setting and each rank's value.
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
  // Registers the optimizer (and scheduler) whose state save_state / load_state carry; with
  // zero_shard_gradients, hands its gradient hook to the DDP models prepared before it. With more
  // than one process, each compares what every rank prepared (the optimizer's type and
  // hyper-parameters, the schedule's lrs) and all ranks stop naming what differs.
  optim::Optimizer& prepare(optim::Optimizer& optimizer);
  optim::LRScheduler& prepare(optim::LRScheduler& scheduler);
  // A loader over this process's share of `dataset`: a DistributedSampler (shuffled by
  // options.seed + epoch when options.shuffle) replaces the loader's own order, batched as
  // AcceleratorOptions::even_batches and split_batches say, and its batches arrive on device()
  // (options.device is set to it; options.pin_memory stages them in page-locked memory first).
  // The accelerator follows the loader's passes: gather_for_metrics, accumulate and save_state
  // know which batch the loop is on.
  data::DataLoader prepare(std::shared_ptr<const data::Dataset> dataset, data::DataLoaderOptions options);

  // Stops every rank with an sg::Error naming `name` and each rank's `value` when the ranks'
  // values differ — for what the program knows must agree and the accelerator cannot see, e.g.
  // check_agreement("vocabulary", vocabulary.to_utf8()) (Note [Ranks agree on the run's
  // settings] in dist/run_fingerprint.h). A collective: every rank calls it. Nothing on one process.
  template <typename Value>
  void check_agreement(const std::string& name, const Value& value) {
    RunFingerprint fingerprint;
    fingerprint.add(name, value);
    check_agreement(fingerprint);
  }
  void check_agreement(const RunFingerprint& fingerprint);  // several fields at once

  // The autocast region of the chosen mixed precision (a region that casts nothing for "no").
  amp::AutocastGuard autocast() const;
  // loss.backward(), `loss` being the mean over this process's batch. Inside a prepared loader's
  // loop the loss is first weighted by the batch's share of the rows the next optimizer step
  // averages over — 1/k for k equal micro-batches, 0 for a join batch — so the step equals one
  // over all of them at once (docs/accelerator.md); outside one, divided by
  // gradient_accumulation_steps. Then scaled under f16.
  void backward(const Tensor& loss);

  // Gradient accumulation. The guard decides whether this micro-batch ends an accumulation: the
  // k-th of each run of gradient_accumulation_steps batches of the loop, or the loader's last
  // batch (outside a loop: every k-th call). Until then sync_gradients() is false, the model's
  // DDP runs under no_sync (gradients add up locally) and step / zero_grad do nothing.
  class GradientAccumulation {
  public:
    GradientAccumulation(const GradientAccumulation&) = delete;
    GradientAccumulation& operator=(const GradientAccumulation&) = delete;

  private:
    friend class Accelerator;
    explicit GradientAccumulation(DistributedDataParallel* hold_back);  // null: synchronise
    std::optional<DistributedDataParallel::NoSync> no_sync_;
  };
  GradientAccumulation accumulate(nn::Module& model);
  bool sync_gradients() const { return sync_gradients_; }
  int gradient_accumulation_steps() const { return options_.gradient_accumulation_steps; }
  // The optimizer steps of one pass over `loader`: ceil(loader.size() / gradient_accumulation_steps),
  // as accumulate() ends an accumulation on the loader's last batch. What a progress bar or an LR
  // schedule counted in steps counts (Accelerate's num_update_steps_per_epoch).
  int64_t optimizer_steps_per_epoch(const data::DataLoader& loader) const;
  // The optimizer steps the next pass over `loader` runs: optimizer_steps_per_epoch, or fewer when
  // that pass resumes part-way through an epoch (load_state, DataLoader::skip_first_batches). What a
  // progress bar over that pass counts.
  int64_t optimizer_steps_in_next_pass(const data::DataLoader& loader) const;

  // optimizer.step(), through the scaler under f16: returns false when the step was skipped
  // because a gradient was inf or NaN (on any rank), then adjusts the scale. Does nothing and
  // returns false when !sync_gradients().
  bool step(optim::Optimizer& optimizer);
  // scheduler.step() and optimizer.zero_grad(), when sync_gradients().
  void step(optim::LRScheduler& scheduler);
  void zero_grad(optim::Optimizer& optimizer);
  // Under f16, divides the prepared optimizer's gradients by the loss scale now (once per step;
  // the scaler's step then does not divide again); otherwise nothing.
  void unscale_gradients();
  // Whether every gradient in `gradients` holds the average over all ranks that a model this
  // accelerator wrapped in DDP computed in its last, synchronised backward. The ranks then agree
  // on an overflow without communicating; otherwise the scaler all-reduces its found-inf flag
  // (Note [Ranks agree on skipping a step] in amp/grad_scaler.h). Every rank gives the same answer.
  bool gradients_averaged_by_ddp(const TensorList& gradients) const;
  // optim::clip_grad_norm_ / clip_grad_value_ over `params`, on the true gradients (unscaled
  // first); the norm's return is the total norm. Gradients are identical on every rank after
  // backward, so every rank clips alike. With zero_shard_gradients the norm comes from
  // ZeroRedundancyOptimizer::clip_grad_norm_, as each rank holds the average of its shard only.
  // An error while !sync_gradients(): the gradients are only part of the sum then (clip inside
  // `if (accelerator.sync_gradients())`, as with Accelerate).
  double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type = 2.0);
  void clip_grad_value_(const TensorList& params, double clip_value);
  const amp::GradScaler& scaler() const { return scaler_; }

  // Collectives: every rank calls them, in the same order. Results are on the argument's device.
  // Every rank's `tensor` concatenated along dim 0 in rank order (0-dim tensors: one row each).
  // Shapes must agree; pad_across_processes first when they do not.
  Tensor gather(const Tensor& tensor);
  // gather, batch by batch, for evaluation: called inside the loop over a prepared loader with
  // this batch's results — one row per example of the batch, or a 0-dim value for the whole
  // batch — returns every rank's in the data set's order, without the examples the sampler
  // repeated (and the rows of join batches), so the batches' results together are exactly the
  // data set. A 0-dim value is kept when its rank's batch holds at least one example. Outside
  // such a loop: gather.
  Tensor gather_for_metrics(const Tensor& batch_results);
  TensorList gather_for_metrics(const TensorList& batch_results);  // several at once, e.g. {predictions, targets}
  // Inside a prepared loader's loop: how many rows of this process's batch are examples of the data
  // set. They come first; the rest is the sampler's padding, which gather_for_metrics drops, so a
  // loss over the examples alone takes the first example_rows() rows. nullopt outside such a loop.
  std::optional<int64_t> example_rows() const;
  // `tensor` summed over every rank ("sum") or averaged ("mean"), as a new tensor.
  Tensor reduce(const Tensor& tensor, const std::string& reduction = "sum");
  // `tensor` padded along `dim` with `pad_index` to the largest size any rank has there, at the
  // end (or at the start with pad_first), so that gather accepts it.
  Tensor pad_across_processes(const Tensor& tensor, int64_t dim = 0, double pad_index = 0, bool pad_first = false);
  void wait_for_everyone();
  // Runs `work` on the main process (or each machine's local main process) first and on the
  // others after it finished, e.g. to download or unpack a data set once. If `work` throws
  // where it ran first, that process rethrows and the others throw an error naming its rank
  // and message, without running `work` (Note [Every rank hears how the main process did]).
  void main_process_first(const std::function<void()>& work);
  void local_main_process_first(const std::function<void()>& work);
  // Runs `work` on the main process only, e.g. to write a file every rank then reads; every rank
  // returns once it is done. If it throws, the main process rethrows and every other rank throws
  // an error naming `what` and the main process's message, instead of waiting at a barrier
  // until the collective timeout.
  void main_process_only(const std::string& what, const std::function<void()>& work);

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
  // state, the prepared optimizer's and scheduler's, the scaler's, every process's default
  // generator (Note [One random stream per rank] in train/accelerator.cpp), the position of
  // every prepared loader whose loop is in progress, and the caller's `metadata` (epoch, step,
  // ...). One file rather than Accelerate's directory, so a crash while saving
  // leaves the previous snapshot whole (docs/decisions.md). When the model's DDP has
  // check_replicas_every set, the ranks first compare their replicas, the optimizer's state
  // included (DistributedDataParallel::check_replicas): a snapshot of one of several diverged
  // models is refused on every rank. A dist::ZeroRedundancyOptimizer's shards are gathered on the
  // main process first, so the snapshot holds the whole state, as a plain optimizer's.
  void save_state(const std::string& path, nn::Module& model, optim::Metadata metadata = {});
  // Restores what save_state wrote, on every process, each its own generator; returns the
  // caller's metadata. A loader saved in the middle of an epoch (prepare the same loaders first)
  // resumes there: its next pass is that epoch, from the first batch not yet seen
  // (DataLoader::skip_first_batches). All or nothing: when the file is refused, everything is as
  // it was before the call, on every rank: one that fails rethrows, and the others throw naming
  // it and restore their state too.
  optim::Metadata load_state(const std::string& path, nn::Module& model);
  // The same with the checkpoint folders of ProjectConfiguration (automatic_checkpoint_naming):
  // save_state writes the next checkpoint_<i>/ whole (Note [Writing a checkpoint folder whole] in
  // train/numbered_checkpoints.h), then removes the oldest beyond total_limit, and returns the
  // folder; a save that fails leaves the earlier ones as they were. load_state loads the newest
  // (an sg::Error naming the folder when there is none). last_checkpoint() is that newest folder,
  // or nullopt, for a program that resumes only when there is one.
  std::string save_state(nn::Module& model, optim::Metadata metadata = {});
  optim::Metadata load_state(nn::Module& model);
  std::optional<std::string> last_checkpoint() const;
  const ProjectConfiguration& project_configuration() const { return options_.project_config; }

private:
  void print_line(const std::string& line) const;
  NumberedCheckpoints project_checkpoints(const char* caller) const;
  optim::Metadata load_state_unguarded(const std::string& path, nn::Module& model);
  double loss_weight() const;
  std::vector<Tensor> all_gather_rows(const Tensor& rows);
  void agree_on_found_inf(Tensor& found_inf, const TensorList& gradients) const;
  const char* nonfinite_origin(const Tensor& param) const;
  void report_skipped_step() const;
  void goes_first(bool first, const std::function<void()>& work);
  // Runs `work` where `runs_here`, then every rank learns whether it threw anywhere.
  void run_and_share_outcome(bool runs_here, const std::string& what, const std::function<void()>& work);
  [[noreturn]] void finish_data_parallel_check();

  AcceleratorOptions options_;
  Device device_ = Device::cpu();
  bool owns_group_ = false;
  amp::GradScaler scaler_;
  CommHook comm_hook_;  // options_.comm_hook's, empty for "no"
  optim::Optimizer* optimizer_ = nullptr;
  optim::LRScheduler* scheduler_ = nullptr;
  LoaderTracker loaders_;                                           // the prepared loaders and the batch in progress
  std::vector<std::weak_ptr<DistributedDataParallel>> ddp_models_;  // what prepare(model) wrapped
  bool sync_gradients_ = true;
  int64_t micro_batches_ = 0;  // accumulate() calls outside a loop, modulo gradient_accumulation_steps
  std::unique_ptr<data::SummaryWriter> tracker_ = std::make_unique<data::SummaryWriter>();
  DataParallelCheck check_;                    // under `sgrun --verify`: Note [DDP is large-batch SGD]
  std::shared_ptr<nn::Module> checked_model_;  // the model prepare() was given, unwrapped
  int64_t checked_steps_ = 0;
};

}  // namespace sg::dist
