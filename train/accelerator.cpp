#include "train/accelerator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "autograd/ops_index.h"
#include "core/cuda_runtime/runtime.h"
#include "core/factory.h"
#include "core/generator.h"
#include "data/distributed_batch_sampler.h"
#include "data/distributed_sampler.h"
#include "dist/default_hooks.h"
#include "dist/dist.h"
#include "dist/environment.h"
#include "dist/exchange.h"
#include "dist/sync_batchnorm.h"
#include "optim/clip_grad.h"
#include "train/run_settings.h"
#include "train/zero_redundancy_optimizer.h"

namespace sg::dist {

namespace {

// AcceleratorOptions::device made concrete for a process whose rank on this machine is
// `local_rank`.
Device choose_device(const std::string& choice, int local_rank) {
  SG_CHECK(choice == "auto" || choice == "cpu" || choice == "cuda",
           "Accelerator: device must be \"auto\", \"cpu\" or \"cuda\", got \"", choice, "\"");
  if (is_initialized()) {  // the program joined a group itself; DDP all-reduces on its device
    const Device group_device = default_group().device();
    SG_CHECK(choice == "auto" || (choice == "cuda") == group_device.is_cuda(), "Accelerator: device \"", choice,
             "\" was asked for, but the process group the program initialised runs on ", group_device,
             " (backend nccl for GPUs, gloo for the CPU); DDP all-reduces the gradients on the group's device");
    return group_device;
  }
  if (choice == "cpu" || (choice == "auto" && !cuda::is_available())) return Device::cpu();
  SG_CHECK(cuda::is_available(),
           "Accelerator: device \"cuda\" was asked for, but CUDA is not available: ", cuda::unavailable_reason());
  SG_CHECK(local_rank < cuda::device_count(),
           "Accelerator: each process trains on the GPU of its LOCAL_RANK, but "
           "LOCAL_RANK=",
           local_rank, " and this machine has ", cuda::device_count(),
           " GPU(s); start at most that "
           "many processes per machine, or choose device \"cpu\"");
  return Device::cuda(local_rank);
}

// Calls `restore` with the metadata entry `key`; any error it meets (malformed JSON, a missing
// field, a value the target refuses) is reported naming the file and the key.
template <typename Restore>
void restore_entry(const std::string& path, const optim::Metadata& metadata, const char* key, Restore&& restore) {
  try {
    restore(metadata.at(key));
  } catch (const std::exception& error) {  // sg::Error and nlohmann::json's exceptions
    SG_FAIL("Accelerator::load_state: ", path, ": metadata '", key, "': ", error.what());
  }
}

const AcceleratorOptions& default_options() {
  static const AcceleratorOptions options;
  return options;
}

// The save_state metadata entry of the loaders' positions: one JSON value per prepared loader,
// null for a loader between passes (Note [Resuming on another world size] in
// train/loader_tracker.h): {"epoch": 0, "batch": 3, "world_size": 2, "sample": 24}.
std::string positions_to_json(const std::vector<std::optional<LoaderPosition>>& positions) {
  nlohmann::json json = nlohmann::json::array();
  for (const auto& position : positions)
    json.push_back(position ? nlohmann::json{{"epoch", position->epoch},
                                             {"batch", position->batch},
                                             {"world_size", position->world_size},
                                             {"sample", position->sample}}
                            : nullptr);
  return json.dump();
}

// A state saved before the world size was recorded has no world_size and sample: world_size 0.
std::vector<std::optional<LoaderPosition>> positions_from_json(const std::string& text) {
  std::vector<std::optional<LoaderPosition>> positions;
  for (const nlohmann::json& entry : nlohmann::json::parse(text)) {
    if (entry.is_null()) positions.emplace_back();
    else
      positions.push_back(LoaderPosition{entry.at("epoch").get<int64_t>(), entry.at("batch").get<int64_t>(),
                                         entry.value("world_size", 0), entry.value("sample", int64_t{0})});
  }
  return positions;
}

// `rows` ([n, ...]) followed by zero rows up to `count`.
Tensor padded_rows(const Tensor& rows, int64_t count) {
  if (rows.size(0) == count) return rows;
  Shape shape = rows.sizes();
  shape[0] = count - rows.size(0);
  return cat({rows, zeros(shape, {rows.dtype(), rows.device()})});
}

// Note [One random stream per rank]
// Each rank's default generator is a stream of its own: set_seed(seed, device_specific = true)
// starts rank r at seed + r, so the ranks draw different dropout masks and augmentations. A
// snapshot keeps every rank's (seed, offset) in its "rng" entry, indexed by rank, as Accelerate
// keeps a random_states_<r>.pkl per process; load_state gives rank r entry r, so a resumed run
// draws what the uninterrupted one would have:
//   [{"offset": 96, "seed": 42}, {"offset": 96, "seed": 43}]
// A snapshot may be loaded by another number of processes (the loaders resume at the same global
// sample: Note [Resuming on another world size] in train/loader_tracker.h), so that is no error
// here: rank r takes entry r % n, n the number of ranks saved. Fewer ranks each keep their own
// stream; extra ranks repeat the first ones' streams. Every rank thus continues a saved stream,
// and ranks that shared one (set_seed without device_specific, for random choices every rank
// must make alike) still share it, which fresh streams for the extra ranks (Accelerate's way
// when random_states_<r>.pkl is missing) would break. The price: with seeds per device, ranks r
// and r + n draw the same masks. A file written before the states were per rank holds one
// object, {"offset": 96, "seed": 42}: every rank takes it, the same rule with n = 1.
nlohmann::json generator_state(const Generator& generator) {
  return {{"seed", generator.seed()}, {"offset", generator.offset()}};
}

// The "rng" entry: every rank's default generator, indexed by rank. A collective on more than one process.
std::string every_rank_generator_state(int world_size) {
  const std::string own = generator_state(default_generator()).dump();
  const std::vector<std::string> per_rank =
      world_size > 1 ? all_gather_strings(default_group(), own) : std::vector<std::string>{own};
  nlohmann::json states = nlohmann::json::array();
  for (const std::string& text : per_rank) states.push_back(nlohmann::json::parse(text));
  return states.dump();
}

// Sets the default generator to `rank`'s state in the "rng" entry `text`. Returns how many ranks'
// states the entry lists (0 for the single object of older snapshots).
size_t restore_generator_state(const std::string& text, int rank) {
  const nlohmann::json json = nlohmann::json::parse(text);
  SG_CHECK(!json.is_array() || !json.empty(), "the entry holds no generator state (an empty list)");
  const nlohmann::json& state = json.is_array() ? json.at(static_cast<size_t>(rank) % json.size()) : json;
  default_generator().manual_seed(state.at("seed").get<uint64_t>());
  default_generator().set_offset(state.at("offset").get<uint64_t>());
  return json.is_array() ? json.size() : 0;
}

constexpr const char* kReservedKeys[] = {"scheduler", "rng", "grad_scaler", "loaders"};

// Note [load_state is all or nothing]
// A checkpoint can be refused part-way: its model tensors match, then the optimizer's state or a
// metadata entry (scheduler, RNG, scaler, loader positions) does not. A caller that catches the
// error and carries on must not train a mixture of the file's model and the optimizer, schedule
// or random stream from before. So everything load_state may change is copied first and put
// back when anything throws: the model's tensors are cloned (loading copies into them in
// place), the optimizer's state is kept by reference (loading replaces its tensors rather than
// writing into them), the rest are a few numbers. The loader positions come last and
// LoaderTracker::resume checks all of them before it changes any, so they need no copy.
// What restore() puts back: for a ZeRO optimizer, this rank's shard (its state_dict() is the
// whole state, gathered onto one rank, which only save_state asks for).
optim::OptimizerState state_to_restore(const optim::Optimizer& optimizer) {
  if (const auto* zero = dynamic_cast<const ZeroRedundancyOptimizer*>(&optimizer)) return zero->local_state_dict();
  return optimizer.state_dict();
}

class StateBeforeLoad {
public:
  StateBeforeLoad(nn::Module& model, optim::Optimizer* optimizer, optim::LRScheduler* scheduler,
                  amp::GradScaler& scaler)
      : model_(model),
        optimizer_(optimizer),
        scheduler_(scheduler),
        scaler_(scaler),
        model_state_(cloned(model.state_dict())),
        scaler_state_(scaler.state_dict()),
        seed_(default_generator().seed()),
        offset_(default_generator().offset()) {
    if (optimizer_ != nullptr) optimizer_state_ = state_to_restore(*optimizer_);
    if (scheduler_ != nullptr) scheduler_state_ = scheduler_->state_dict();
  }

  void restore() const {
    model_.load_state_dict(model_state_);
    if (scheduler_ != nullptr) scheduler_->load_state_dict(scheduler_state_);
    if (optimizer_ != nullptr) optimizer_->load_state_dict(optimizer_state_);  // after the scheduler: its lr is the one
    scaler_.load_state_dict(scaler_state_);
    default_generator().manual_seed(seed_);
    default_generator().set_offset(offset_);
  }

private:
  static nn::StateDict cloned(nn::StateDict state) {
    NoGradGuard no_grad;
    for (auto& [name, tensor] : state) tensor = tensor.clone();
    return state;
  }

  nn::Module& model_;
  optim::Optimizer* optimizer_;
  optim::LRScheduler* scheduler_;
  amp::GradScaler& scaler_;
  nn::StateDict model_state_;
  optim::OptimizerState optimizer_state_;
  optim::LRScheduler::State scheduler_state_;
  amp::GradScalerState scaler_state_;
  uint64_t seed_, offset_;
};

}  // namespace

Device accelerator_device(const std::string& choice) {
  const std::optional<LaunchEnvironment> environment = launch_environment();
  return choose_device(choice, environment.has_value() ? environment->local_rank : 0);
}

void set_seed(uint64_t seed, bool device_specific) {
  manual_seed(device_specific ? seed + static_cast<uint64_t>(get_rank()) : seed);
}

// One shared default, rather than a temporary per call: GCC 12 at -O3 warns (wrongly) that the
// temporary's strings may be used uninitialised when it is destroyed.
Accelerator::Accelerator() : Accelerator(default_options()) {}

Accelerator::Accelerator(const AcceleratorOptions& options)
    : options_(options),
      scaler_({.enabled = options_.mixed_precision == "f16",
               .agree_across_ranks = [this](Tensor& found_inf,
                                            const TensorList& gradients) { agree_on_found_inf(found_inf, gradients); },
               .diagnostics = options_.amp_diagnostics}) {
  SG_CHECK(options_.mixed_precision == "no" || options_.mixed_precision == "f16" || options_.mixed_precision == "bf16",
           "Accelerator: mixed_precision must be \"no\", \"f16\" or \"bf16\", got \"", options_.mixed_precision, "\"");
  SG_CHECK(!options_.amp_diagnostics || options_.mixed_precision == "f16",
           "Accelerator: amp_diagnostics reports on the f16 loss scaler, but mixed_precision is \"",
           options_.mixed_precision, "\"; use \"f16\" (bf16 has f32's range: it neither overflows nor needs a scaler)");
  comm_hook_ = builtin_comm_hook(options_.comm_hook);  // an unknown name fails here, before any model
  SG_CHECK(!options_.zero_shard_gradients || comm_hook_ == nullptr,
           "Accelerator: zero_shard_gradients sends DDP's buckets through the ZeRO optimizer's reduce-scatter hook, "
           "so it cannot also send them through comm_hook \"",
           options_.comm_hook, "\"; set comm_hook to \"no\"");
  SG_CHECK(options_.gradient_accumulation_steps >= 1,
           "Accelerator: gradient_accumulation_steps must be at least 1, got ", options_.gradient_accumulation_steps);
  SG_CHECK(options_.project_config.total_limit >= 0,
           "Accelerator: ProjectConfiguration's total_limit must be 0 (keep every checkpoint) or more, got ",
           options_.project_config.total_limit);
  device_ = accelerator_device(options_.device);
  // The current device is where the CUDA runtime puts work that names no device; NCCL binds
  // its communicator to it (init_process_group selects it too).
  if (device_.is_cuda()) cuda::set_device(device_.index);
  if (!is_initialized() && launch_environment().has_value()) {
    InitOptions init;
    init.backend = device_.is_cuda() ? "nccl" : "gloo";
    init_process_group(init);
    owns_group_ = true;
  }
  check_agreement(accelerator_settings(options_));
  // A CPU has no f16 or bf16 matrix products here: each one runs in f32 and rounds its result, so
  // the run shows a GPU's rounding but is slower than f32, which a user should hear once.
  if (options_.mixed_precision != "no" && device_.is_cpu())
    print("mixed precision ", options_.mixed_precision, " on the CPU is emulated (f32 products rounded to ",
          options_.mixed_precision, "): the rounding of a GPU run, slower than f32");
  check_ = data_parallel_check_from_environment();
  if (check_.active())
    print("sgrun --verify: stopping after ", check_.steps, " optimizer steps",
          check_.batch_scale > 1 ? " with every loader's batch size multiplied by " + std::to_string(check_.batch_scale)
                                 : std::string(),
          "; the model's state goes to ", check_.output);
}

Accelerator::~Accelerator() {
  if (owns_group_ && is_initialized()) destroy_process_group();
}

int Accelerator::process_index() const { return get_rank(); }
int Accelerator::local_process_index() const { return get_local_rank(); }
int Accelerator::num_processes() const { return get_world_size(); }

std::shared_ptr<nn::Module> Accelerator::prepare(std::shared_ptr<nn::Module> model) {
  if (num_processes() > 1 && options_.sync_batchnorm) convert_sync_batchnorm(*model);
  // On the device before DDP wraps it, as PyTorch's order is: DDP broadcasts rank 0's parameters
  // and sizes its gradient buckets on the device the parameters are on.
  model->to(device_);
  scaler_.add_parameter_names(*model);  // the names without DDP's "module." prefix
  if (check_.active()) checked_model_ = model;
  if (num_processes() == 1) {
    if (check_.active()) optim::save_checkpoint(check_.output + ".initial", *model);
    return model;
  }
  DDPOptions ddp_options = options_.ddp;
  ddp_options.find_nonfinite_origin = ddp_options.find_nonfinite_origin || options_.amp_diagnostics;
  auto ddp = std::make_shared<DistributedDataParallel>(std::move(model), ddp_options);
  if (comm_hook_) ddp->register_comm_hook(comm_hook_);
  ddp_models_.push_back(ddp);
  // After DDP's construction, which gave every rank rank 0's parameters and buffers.
  if (check_.active() && is_main_process()) optim::save_checkpoint(check_.output + ".initial", ddp->module());
  return ddp;
}

optim::Optimizer& Accelerator::prepare(optim::Optimizer& optimizer) {
  check_agreement(optimizer_settings(optimizer));
  optimizer_ = &optimizer;
  if (options_.zero_shard_gradients && num_processes() > 1) {
    auto* zero = dynamic_cast<ZeroRedundancyOptimizer*>(&optimizer);
    SG_CHECK(zero != nullptr,
             "Accelerator: zero_shard_gradients reduce-scatters the gradients of a "
             "dist::ZeroRedundancyOptimizer's shards, but the prepared optimizer is a plain ",
             optimizer.type_name(), "; wrap it in a ZeroRedundancyOptimizer first");
    SG_CHECK(!ddp_models_.empty(), "Accelerator: zero_shard_gradients hands the ZeRO optimizer's gradient hook to the ",
             "models prepare() wrapped in DDP, but none was prepared yet; prepare(model) before prepare(optimizer)");
    for (const auto& weak : ddp_models_)
      if (const auto ddp = weak.lock()) ddp->register_comm_hook(zero->reduce_scatter_gradients_hook());
  }
  return optimizer;
}

optim::LRScheduler& Accelerator::prepare(optim::LRScheduler& scheduler) {
  check_agreement(scheduler_settings(scheduler));
  scheduler_ = &scheduler;
  return scheduler;
}

data::DataLoader Accelerator::prepare(std::shared_ptr<const data::Dataset> dataset, data::DataLoaderOptions options) {
  SG_CHECK(options.sampler == nullptr && options.batch_sampler == nullptr,
           "Accelerator::prepare(loader): the options already name a sampler; the accelerator supplies the "
           "DistributedSampler itself (set shuffle and seed instead)");
  SG_CHECK(dataset != nullptr, "Accelerator::prepare(loader): the dataset is null");
  options.batch_size *= check_.batch_scale;
  if (options_.split_batches) {
    SG_CHECK(options.batch_size % num_processes() == 0, "Accelerator::prepare(loader): with split_batches the batch ",
             "size is that of all processes together, so it must be a multiple of the ", num_processes(),
             " processes; got ", options.batch_size);
    options.batch_size /= num_processes();
  }
  auto sampler = std::make_shared<data::DistributedSampler>(dataset->size(), num_processes(), process_index(),
                                                            options.shuffle, options.seed);
  auto batches = std::make_shared<data::DistributedBatchSampler>(std::move(sampler), options.batch_size,
                                                                 options.drop_last, options_.even_batches);
  check_agreement(loader_settings(loaders_.positions().size(), options, *batches));  // one position per loader
  options.observer = loaders_.track(batches);
  options.batch_sampler = std::move(batches);  // it decides order and batches
  options.shuffle = false;
  options.drop_last = false;
  options.device = device_;
  return data::DataLoader(std::move(dataset), std::move(options));
}

void Accelerator::check_agreement(const RunFingerprint& fingerprint) {
  if (num_processes() > 1) check_ranks_agree(default_group(), fingerprint, "Accelerator");
}

amp::AutocastGuard Accelerator::autocast() const {
  return amp::AutocastGuard(options_.mixed_precision == "bf16" ? DType::bf16 : DType::f16,
                            options_.mixed_precision != "no");
}

// The share of the batch in progress in the training rows of its accumulation window (the batches
// from the last sync step to the next, over every rank). DDP averages the ranks' gradients, so
// the rank's weight is W times that share; with equal full batches it is 1/k.
double Accelerator::loss_weight() const {
  const int steps = options_.gradient_accumulation_steps;
  const std::optional<LoaderTracker::Current> current = loaders_.current();
  if (!current.has_value()) return 1.0 / steps;
  const data::DistributedBatchSampler& batches = *current->batches;
  const int64_t window_begin = current->batch / steps * steps;
  const int64_t window_end = std::min(window_begin + steps, batches.size());
  int64_t window_rows = 0;
  for (int64_t batch = window_begin; batch < window_end; ++batch)
    for (int rank = 0; rank < num_processes(); ++rank) window_rows += batches.training_rows(rank, batch);
  const int64_t rows = batches.training_rows(process_index(), current->batch);
  return static_cast<double>(rows * num_processes()) / static_cast<double>(window_rows);
}

void Accelerator::backward(const Tensor& loss) {
  const double weight = loss_weight();
  scaler_.scale(weight == 1.0 ? loss : loss * weight).backward();
}

Accelerator::GradientAccumulation::GradientAccumulation(DistributedDataParallel* hold_back) {
  if (hold_back != nullptr) no_sync_.emplace(*hold_back);
}

std::string batch_note(int gradient_accumulation_steps) {
  if (gradient_accumulation_steps == 1) return "step";
  return "micro-batch, " + std::to_string(gradient_accumulation_steps) + " micro-batches per step";
}

namespace {

// The optimizer steps accumulate() takes over batches first .. batches - 1 of a pass: after batches
// k, 2k, ... (counted from the epoch's first) and after the last.
int64_t sync_steps(int64_t first, int64_t batches, int64_t k) {
  if (first >= batches) return 0;
  return batches / k - first / k + (batches % k != 0 ? 1 : 0);
}

}  // namespace

int64_t Accelerator::optimizer_steps_per_epoch(const data::DataLoader& loader) const {
  return sync_steps(0, loader.size(), options_.gradient_accumulation_steps);
}

int64_t Accelerator::optimizer_steps_in_next_pass(const data::DataLoader& loader) const {
  int64_t batches = loader.size(), first = loader.next_pass_first_batch();
  if (const std::optional<ResumePoint> resume = loaders_.pending_resume(loader.batch_sampler())) {
    if (resume->batches != nullptr) batches = resume->batches->size();  // the rest of the epoch dealt anew
    first = resume->batch;
  }
  return sync_steps(first, batches, options_.gradient_accumulation_steps);
}

Accelerator::GradientAccumulation Accelerator::accumulate(nn::Module& model) {
  const int steps = options_.gradient_accumulation_steps;
  if (const std::optional<LoaderTracker::Current> current = loaders_.current()) {
    const int64_t done = current->batch + 1;  // batches of the epoch once this one is through
    sync_gradients_ = done % steps == 0 || done == current->batches->size();
  } else {
    micro_batches_ = (micro_batches_ + 1) % steps;
    sync_gradients_ = micro_batches_ == 0;
  }
  return GradientAccumulation(sync_gradients_ ? nullptr : dynamic_cast<DistributedDataParallel*>(&model));
}

bool Accelerator::step(optim::Optimizer& optimizer) {
  if (!sync_gradients_) return false;
  const bool stepped = scaler_.step(optimizer);
  scaler_.update();
  if (!stepped && scaler_.diagnostics() != nullptr) report_skipped_step();
  if (check_.active() && ++checked_steps_ == check_.steps) finish_data_parallel_check();
  return stepped;
}

// The run under `sgrun --verify` ends here, on every rank at the same step: the main process
// saves the state, everyone waits for it, and the process exits at once, without the rest of the
// program (its epochs, evaluation and snapshots are not what is being checked).
void Accelerator::finish_data_parallel_check() {
  SG_CHECK(checked_model_ != nullptr,
           "sgrun --verify: the program stepped an optimizer without preparing a model "
           "with the Accelerator; the check saves the prepared model's state");
  main_process_only("sgrun --verify: saving the checked state",
                    [&] { optim::save_checkpoint(check_.output, *checked_model_); });
  print("sgrun --verify: ", check_.steps, " steps done; state saved to ", check_.output);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);  // no destructors: loader workers and the process group are still running
}

namespace {

constexpr const char* kBeganBeforeAverage = "began on this rank, before DDP's all-reduce";
constexpr const char* kArrivedThroughAverage = "arrived from another rank through DDP's all-reduce";
constexpr const char* kLocalGradient = "in this rank's own gradients (not averaged by DDP)";

}  // namespace

// Where this rank's inf/NaN gradient of `param` began (Note [Finding the rank an overflow came
// from] in dist/reducer.h); asked right after the step, before the gradients change again.
const char* Accelerator::nonfinite_origin(const Tensor& param) const {
  for (const auto& weak : ddp_models_) {
    const auto ddp = weak.lock();
    if (ddp == nullptr || !ddp->reducer().holds_average(param.grad())) continue;
    return ddp->reducer().was_nonfinite_before_average(param) ? kBeganBeforeAverage : kArrivedThroughAverage;
  }
  return kLocalGradient;
}

// A skipped step's report, grouped by where the inf/NaN began. A rank prints it when some began
// there; the main rank always does, so one line says the step was skipped even when the rank of
// origin is another.
void Accelerator::report_skipped_step() const {
  const amp::SkippedStep& skipped = scaler_.diagnostics()->skipped_steps().back();
  std::map<const char*, std::vector<amp::NonfiniteGradient>> by_origin;
  for (const amp::NonfiniteGradient& gradient : skipped.gradients)
    by_origin[nonfinite_origin(gradient.handle)].push_back(gradient);
  const bool began_here = by_origin.size() > by_origin.count(kArrivedThroughAverage);  // some other origin
  if (!began_here && !is_main_process()) return;
  std::ostringstream text;
  text << "amp: rank " << process_index() << " skipped " << skipped.heading();
  if (skipped.gradients.empty()) text << ": this rank's gradients were all finite; another rank's were not";
  for (const char* origin : {kBeganBeforeAverage, kLocalGradient, kArrivedThroughAverage}) {
    const auto group = by_origin.find(origin);
    if (group != by_origin.end()) text << "\n  inf/NaN " << origin << ": " << amp::list_gradients(group->second);
  }
  print_line(text.str());
}

void Accelerator::step(optim::LRScheduler& scheduler) {
  if (sync_gradients_) scheduler.step();
}

void Accelerator::zero_grad(optim::Optimizer& optimizer) {
  if (sync_gradients_) optimizer.zero_grad();
}

// Every rank must skip the same f16 steps (Note [Ranks agree on skipping a step] in
// amp/grad_scaler.h). Gradients that DDP averaged carry an overflow everywhere already, and
// PyTorch's scaler relies on that and never communicates; the all-reduce stays where gradients
// are local: parameters outside DDP, a step after no_sync. (A DDP parameter that no rank's
// backward reached keeps an undefined .grad, which the scaler does not check.) The decision must
// be the same on every rank — a rank that skipped the all-reduce would leave the others waiting in
// it — so it looks only at what the ranks share: which gradients are bucket views, and whether the
// last backward was synchronised. A gradient changed on one rank alone after backward is not
// noticed; the replicas would drift apart from that change anyway.
//
// ZeRO-2's hook averages each gradient on its owner only (holds_average differs from rank to rank
// there), so with zero_shard_gradients the answer is no on every rank.
bool Accelerator::gradients_averaged_by_ddp(const TensorList& gradients) const {
  if (gradients.empty() || options_.zero_shard_gradients) return false;
  return std::all_of(gradients.begin(), gradients.end(), [&](const Tensor& grad) {
    return std::any_of(ddp_models_.begin(), ddp_models_.end(), [&](const auto& weak) {
      const auto ddp = weak.lock();
      return ddp != nullptr && ddp->reducer().holds_average(grad);
    });
  });
}

void Accelerator::agree_on_found_inf(Tensor& found_inf, const TensorList& gradients) const {
  if (num_processes() == 1 || gradients_averaged_by_ddp(gradients)) return;
  ProcessGroup& group = default_group();
  Tensor on_group_device = found_inf.to(group.device());  // the same tensor when it is there already
  group.all_reduce(on_group_device, ReduceOp::MAX)->wait();
  if (!on_group_device.is_same(found_inf)) found_inf.copy_(on_group_device);
}

void Accelerator::unscale_gradients() {
  if (!scaler_.is_enabled()) return;
  SG_CHECK(optimizer_ != nullptr,
           "Accelerator: under f16 the gradients must be unscaled before clipping; "
           "prepare(optimizer) so the accelerator knows which optimizer holds them");
  scaler_.unscale_(*optimizer_);
}

double Accelerator::clip_grad_norm_(const TensorList& params, double max_norm, double norm_type) {
  SG_CHECK(sync_gradients_,
           "Accelerator::clip_grad_norm_: called on a micro-batch that does not end its gradient "
           "accumulation, whose gradients are only part of the sum; clip when sync_gradients()");
  unscale_gradients();
  if (auto* zero = dynamic_cast<ZeroRedundancyOptimizer*>(optimizer_); zero != nullptr && zero->shards_gradients())
    return zero->clip_grad_norm_(params, max_norm, norm_type);
  return optim::clip_grad_norm_(params, max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const TensorList& params, double clip_value) {
  SG_CHECK(sync_gradients_,
           "Accelerator::clip_grad_value_: called on a micro-batch that does not end its gradient "
           "accumulation, whose gradients are only part of the sum; clip when sync_gradients()");
  unscale_gradients();
  optim::clip_grad_value_(params, clip_value);
}

// Every rank's `rows`, on the group's device (the GPU under NCCL), in rank order.
std::vector<Tensor> Accelerator::all_gather_rows(const Tensor& rows) {
  if (num_processes() == 1) return {rows};
  ProcessGroup& group = default_group();
  std::vector<Tensor> per_rank;
  for (int r = 0; r < num_processes(); ++r) per_rank.push_back(empty(rows.sizes(), {rows.dtype(), group.device()}));
  const Tensor contribution = rows.to(group.device()).contiguous();
  group.all_gather(per_rank, contribution)->wait();
  return per_rank;
}

Tensor Accelerator::gather(const Tensor& tensor) {
  return cat(all_gather_rows(tensor.dim() == 0 ? tensor.reshape({1}) : tensor)).to(tensor.device());
}

Tensor Accelerator::gather_for_metrics(const Tensor& batch_results) {
  const std::optional<LoaderTracker::Current> current = loaders_.current();
  if (!current.has_value()) return gather(batch_results);
  const data::DistributedBatchSampler& batches = *current->batches;
  // Every rank contributes padded_rows rows (uneven batches are padded with zeros here), which
  // drop_padding puts back in the sampler's order, keeping the data set's examples. A 0-dim
  // value is one row per rank: rank r's is kept when position first_row * W + r is an example.
  Tensor rows = batch_results.dim() == 0 ? batch_results.reshape({1}) : batch_results;
  if (batch_results.dim() > 0) {
    const int64_t delivered = batches.delivered_rows(process_index(), current->batch);
    SG_CHECK(batch_results.size(0) == delivered, "Accelerator::gather_for_metrics: expected one row per example of ",
             "this process's batch (", delivered, " rows), got ", shape_str(batch_results.sizes()),
             "; a 0-dim tensor stands for the whole batch");
    rows = padded_rows(rows, batches.padded_rows(current->batch));
  }
  std::vector<Tensor> per_rank = all_gather_rows(rows);
  for (Tensor& rank_rows : per_rank) rank_rows = rank_rows.to(Device::cpu());  // drop_padding works on the host
  return data::drop_padding(per_rank, batches.sampler().examples_in_list(), batches.first_row(current->batch))
      .to(batch_results.device());
}

TensorList Accelerator::gather_for_metrics(const TensorList& batch_results) {
  TensorList gathered;
  for (const Tensor& results : batch_results) gathered.push_back(gather_for_metrics(results));
  return gathered;
}

std::optional<int64_t> Accelerator::example_rows() const {
  const std::optional<LoaderTracker::Current> current = loaders_.current();
  if (!current.has_value()) return std::nullopt;
  return current->batches->example_rows(process_index(), current->batch);
}

Tensor Accelerator::reduce(const Tensor& tensor, const std::string& reduction) {
  SG_CHECK(reduction == "sum" || reduction == "mean", "Accelerator::reduce: reduction must be \"sum\" or \"mean\", ",
           "got \"", reduction, "\"");
  if (num_processes() == 1) return tensor.clone();
  ProcessGroup& group = default_group();
  Tensor result = tensor.to(group.device()).contiguous().clone();
  group.all_reduce(result, reduction == "sum" ? ReduceOp::SUM : ReduceOp::AVG)->wait();
  return result.to(tensor.device());
}

Tensor Accelerator::pad_across_processes(const Tensor& tensor, int64_t dim, double pad_index, bool pad_first) {
  SG_CHECK(dim >= 0 && dim < tensor.dim(), "Accelerator::pad_across_processes: dim ", dim, " is not a dimension of a ",
           shape_str(tensor.sizes()), " tensor");
  const Tensor sizes = gather(sg::tensor(std::vector<int64_t>{tensor.size(dim)}));
  const auto largest = static_cast<int64_t>(sizes.max().item());
  if (largest == tensor.size(dim)) return tensor;
  Shape shape = tensor.sizes();
  shape[static_cast<size_t>(dim)] = largest;
  Tensor padded = full(shape, pad_index, {tensor.dtype(), tensor.device()});
  NoGradGuard no_grad;
  padded.narrow(dim, pad_first ? largest - tensor.size(dim) : 0, tensor.size(dim)).copy_(tensor);
  return padded;
}

void Accelerator::wait_for_everyone() {
  if (num_processes() > 1) default_group().barrier()->wait();
}

// Note [Every rank hears how the main process did]
// "The main process writes, the others wait at a barrier" hangs the others when the write fails:
// the main process leaves with its error and never reaches the barrier, so they wait out the
// collective timeout (30 minutes by default) and then report a lost rank, not the full disk.
// So the barrier carries the outcome instead: every rank contributes its error message ("" for
// none, or for not having run the work) to one all_gather_strings, which returns only when all
// have arrived, as a barrier does. A rank whose work threw rethrows its own error; the others
// throw one quoting the first failed rank's message.
void Accelerator::run_and_share_outcome(bool runs_here, const std::string& what, const std::function<void()>& work) {
  std::exception_ptr error;
  std::string message;
  if (runs_here) {
    try {
      work();
    } catch (const std::exception& e) {
      error = std::current_exception();
      message = e.what()[0] != '\0' ? e.what() : "an exception with no message";
    } catch (...) {
      error = std::current_exception();
      message = "an exception that is not a std::exception";
    }
  }
  if (num_processes() > 1) {
    const std::vector<std::string> outcomes = all_gather_strings(default_group(), message);
    if (error) std::rethrow_exception(error);
    for (size_t rank = 0; rank < outcomes.size(); ++rank)
      SG_CHECK(outcomes[rank].empty(), what, " failed on rank ", rank, ", so every rank stops: ", outcomes[rank]);
  }
  if (error) std::rethrow_exception(error);
}

void Accelerator::main_process_only(const std::string& what, const std::function<void()>& work) {
  run_and_share_outcome(is_main_process(), what, work);
}

void Accelerator::goes_first(bool first, const std::function<void()>& work) {
  run_and_share_outcome(first, "the work of the process that goes first", work);
  if (!first) work();
}

void Accelerator::main_process_first(const std::function<void()>& work) { goes_first(is_main_process(), work); }

void Accelerator::local_main_process_first(const std::function<void()>& work) {
  goes_first(is_local_main_process(), work);
}

void Accelerator::print_line(const std::string& line) const {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Accelerator::init_trackers(const std::string& log_dir, data::SummaryWriterOptions options) {
  if (is_main_process()) tracker_ = std::make_unique<data::SummaryWriter>(log_dir, std::move(options));
}

void Accelerator::log(const std::map<std::string, double>& values, int64_t step) {
  for (const auto& [tag, value] : values) tracker_->add_scalar(tag, value, step);
}

void Accelerator::end_training() {
  if (scaler_.diagnostics() != nullptr) print(scaler_.diagnostics()->summary());
  tracker_->close();
}

nn::Module& Accelerator::unwrap_model(nn::Module& model) const {
  if (auto* ddp = dynamic_cast<DistributedDataParallel*>(&model)) return ddp->module();
  return model;
}

void Accelerator::save_state(const std::string& path, nn::Module& model, optim::Metadata metadata) {
  for (const char* reserved : kReservedKeys)
    SG_CHECK(metadata.count(reserved) == 0, "Accelerator::save_state: the metadata key '", reserved,
             "' is reserved for the accelerator's own state");
  // Only a snapshot taken inside a loop needs positions; one between epochs stays loadable by a
  // program that prepares other loaders.
  const std::vector<std::optional<LoaderPosition>> positions = loaders_.positions();
  if (std::any_of(positions.begin(), positions.end(), [](const auto& position) { return position.has_value(); }))
    metadata["loaders"] = positions_to_json(positions);
  if (scheduler_ != nullptr) {
    const auto state = scheduler_->state_dict();
    metadata["scheduler"] = nlohmann::json{{"last_epoch", state.last_epoch}, {"base_lrs", state.base_lrs}}.dump();
  }
  if (scaler_.is_enabled()) metadata["grad_scaler"] = scaler_.state_dict().to_json();
  metadata["rng"] = every_rank_generator_state(num_processes());  // Note [One random stream per rank]
  // Apart from the generators, gathered above, every rank holds the same state after a step; one
  // writer, and nobody reads before it is done.
  // With check_replicas_every, that is checked first, the optimizer's state included.
  auto* ddp = dynamic_cast<DistributedDataParallel*>(&model);
  if (ddp != nullptr && ddp->options().check_replicas_every > 0)
    ddp->check_replicas(optimizer_ != nullptr ? optimizer_->named_state(ddp->named_parameters()) : nn::NamedTensors{});
  // A ZeRO optimizer's shards travel to the main process first (a collective), so that the
  // snapshot holds the whole state, as a plain optimizer's, and loads into either.
  if (auto* zero = dynamic_cast<ZeroRedundancyOptimizer*>(optimizer_)) zero->consolidate_state_dict(0);
  main_process_only("Accelerator::save_state",
                    [&] { optim::save_checkpoint(path, unwrap_model(model), optimizer_, metadata); });
}

optim::Metadata Accelerator::load_state(const std::string& path, nn::Module& model) {
  const StateBeforeLoad before(unwrap_model(model), optimizer_, scheduler_, scaler_);
  try {
    // Every rank loads; a rank that cannot (a missing file on its machine, a ZeRO shard that does
    // not fit) must not leave the others to train on and wait for it in the next collective
    // (Note [Every rank hears how the main process did]).
    optim::Metadata metadata;
    run_and_share_outcome(true, "Accelerator::load_state", [&] { metadata = load_state_unguarded(path, model); });
    return metadata;
  } catch (...) {
    before.restore();
    throw;
  }
}

optim::Metadata Accelerator::load_state_unguarded(const std::string& path, nn::Module& model) {
  optim::Metadata metadata = optim::load_checkpoint(path, unwrap_model(model), optimizer_);
  if (scheduler_ != nullptr) {
    SG_CHECK(metadata.count("scheduler") == 1, "Accelerator::load_state: ", path,
             " holds no scheduler state, but a scheduler was prepared");
    restore_entry(path, metadata, "scheduler", [&](const std::string& text) {
      const auto json = nlohmann::json::parse(text);
      scheduler_->load_state_dict(
          {json.at("last_epoch").get<int64_t>(), json.at("base_lrs").get<std::vector<double>>()});
    });
  }
  if (metadata.count("rng") == 1) {
    size_t saved_ranks = 0;
    restore_entry(path, metadata, "rng",
                  [&](const std::string& text) { saved_ranks = restore_generator_state(text, process_index()); });
    if (saved_ranks != 0 && saved_ranks != static_cast<size_t>(num_processes()))
      print("Accelerator::load_state: ", path, " holds the random streams of ", saved_ranks,
            " process(es), this run has ", num_processes(), ": rank r continues saved rank r % ", saved_ranks, "'s");
  }
  if (scaler_.is_enabled() && metadata.count("grad_scaler") == 1) {
    restore_entry(path, metadata, "grad_scaler",
                  [&](const std::string& text) { scaler_.load_state_dict(amp::GradScalerState::from_json(text)); });
  }
  if (metadata.count("loaders") == 1) {
    restore_entry(path, metadata, "loaders", [&](const std::string& text) {
      loaders_.resume(positions_from_json(text), options_.gradient_accumulation_steps);
    });
  }
  for (const char* reserved : kReservedKeys) metadata.erase(reserved);
  return metadata;
}

NumberedCheckpoints Accelerator::project_checkpoints(const char* caller) const {
  const ProjectConfiguration& project = options_.project_config;
  SG_CHECK(
      project.automatic_checkpoint_naming && !project.project_dir.empty(), "Accelerator::", caller,
      " without a path needs ProjectConfiguration's project_dir and automatic_checkpoint_naming (got project_dir '",
      project.project_dir, "', automatic_checkpoint_naming ", project.automatic_checkpoint_naming, ")");
  return NumberedCheckpoints((std::filesystem::path(project.project_dir) / "checkpoints").string(), "checkpoint_",
                             "Accelerator::save_state");
}

std::string Accelerator::save_state(nn::Module& model, optim::Metadata metadata) {
  const NumberedCheckpoints checkpoints = project_checkpoints("save_state");
  // Every rank reads the same folder: the previous save ended with every rank waiting for its rename.
  const auto existing = checkpoints.list();
  const int64_t number = existing.empty() ? 0 : existing.back().first + 1;
  std::string staging;
  main_process_only("Accelerator::save_state", [&] { staging = checkpoints.begin_writing(number); });
  save_state((std::filesystem::path(staging) / kCheckpointStateFile).string(), model, std::move(metadata));
  main_process_only("Accelerator::save_state", [&] {
    checkpoints.finish_writing(number, /*replace=*/false);
    checkpoints.remove_oldest(options_.project_config.total_limit);
  });
  return checkpoints.folder(number);
}

std::optional<std::string> Accelerator::last_checkpoint() const { return project_checkpoints("load_state").newest(); }

optim::Metadata Accelerator::load_state(nn::Module& model) {
  const std::optional<std::string> folder = last_checkpoint();
  SG_CHECK(folder.has_value(), "Accelerator::load_state: ", options_.project_config.project_dir,
           "/checkpoints holds no checkpoint_<i> folder to resume from");
  return load_state((std::filesystem::path(*folder) / kCheckpointStateFile).string(), model);
}

}  // namespace sg::dist
