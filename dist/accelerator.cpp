#include "dist/accelerator.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "core/generator.h"
#include "data/distributed_sampler.h"
#include "dist/dist.h"
#include "dist/environment.h"
#include "dist/sync_batchnorm.h"
#include "optim/clip_grad.h"

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
    throw Error(detail::concat("Accelerator::load_state: ", path, ": metadata '", key, "': ", error.what()));
  }
}

const AcceleratorOptions& default_options() {
  static const AcceleratorOptions options;
  return options;
}

}  // namespace

// One shared default, rather than a temporary per call: GCC 12 at -O3 warns (wrongly) that the
// temporary's strings may be used uninitialised when it is destroyed.
Accelerator::Accelerator() : Accelerator(default_options()) {}

Accelerator::Accelerator(const AcceleratorOptions& options)
    : options_(options),
      scaler_({.enabled = options_.mixed_precision == "f16"}) {
  SG_CHECK(options_.mixed_precision == "no" || options_.mixed_precision == "f16" || options_.mixed_precision == "bf16",
           "Accelerator: mixed_precision must be \"no\", \"f16\" or \"bf16\", got \"", options_.mixed_precision, "\"");
  const std::optional<LaunchEnvironment> environment = launch_environment();
  device_ = choose_device(options_.device, environment.has_value() ? environment->local_rank : 0);
  // The current device is where the CUDA runtime puts work that names no device; NCCL binds
  // its communicator to it (init_process_group selects it too).
  if (device_.is_cuda()) cuda::set_device(device_.index);
  if (!is_initialized() && environment.has_value()) {
    InitOptions init;
    init.backend = device_.is_cuda() ? "nccl" : "gloo";
    init_process_group(init);
    owns_group_ = true;
  }
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
  if (num_processes() == 1) return model;
  return std::make_shared<DistributedDataParallel>(std::move(model), options_.ddp);
}

optim::Optimizer& Accelerator::prepare(optim::Optimizer& optimizer) {
  optimizer_ = &optimizer;
  return optimizer;
}

optim::LRScheduler& Accelerator::prepare(optim::LRScheduler& scheduler) {
  scheduler_ = &scheduler;
  return scheduler;
}

data::DataLoader Accelerator::prepare(std::shared_ptr<const data::Dataset> dataset, data::DataLoaderOptions options) {
  SG_CHECK(options.sampler == nullptr,
           "Accelerator::prepare(loader): the options already name a sampler; the accelerator supplies the "
           "DistributedSampler itself (set shuffle and seed instead)");
  options.sampler = std::make_shared<data::DistributedSampler>(dataset->size(), num_processes(), process_index(),
                                                               options.shuffle, options.seed);
  options.shuffle = false;  // the sampler decides the order
  options.device = device_;
  return data::DataLoader(std::move(dataset), std::move(options));
}

amp::AutocastGuard Accelerator::autocast() const {
  return amp::AutocastGuard(options_.mixed_precision == "bf16" ? DType::bf16 : DType::f16,
                            options_.mixed_precision != "no");
}

void Accelerator::backward(const Tensor& loss) { scaler_.scale(loss).backward(); }

bool Accelerator::step(optim::Optimizer& optimizer) {
  const bool stepped = scaler_.step(optimizer);
  scaler_.update();
  return stepped;
}

double Accelerator::clip_grad_norm_(const TensorList& params, double max_norm) {
  if (scaler_.is_enabled()) {
    SG_CHECK(optimizer_ != nullptr,
             "Accelerator::clip_grad_norm_: under f16 the gradients must be unscaled before "
             "clipping; prepare(optimizer) so the accelerator knows which optimizer holds them");
    scaler_.unscale_(*optimizer_);
  }
  return optim::clip_grad_norm_(params, max_norm);
}

Tensor Accelerator::gather_for_metrics(const Tensor& local, int64_t dataset_size) {
  if (num_processes() == 1) return local.narrow(0, 0, std::min(dataset_size, local.size(0)));
  // The collective runs on the group's device (the GPU under NCCL); drop_padding interleaves
  // the ranks' rows on the host; the result goes back to where the caller's results were.
  ProcessGroup& group = default_group();
  std::vector<Tensor> per_rank;
  for (int r = 0; r < num_processes(); ++r) per_rank.push_back(empty(local.sizes(), {local.dtype(), group.device()}));
  Tensor contribution = local.to(group.device()).contiguous();
  group.all_gather(per_rank, contribution)->wait();
  for (Tensor& rank_results : per_rank) rank_results = rank_results.to(Device::cpu());
  return data::drop_padding(per_rank, dataset_size).to(local.device());
}

void Accelerator::wait_for_everyone() {
  if (num_processes() > 1) default_group().barrier()->wait();
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

void Accelerator::end_training() { tracker_->close(); }

nn::Module& Accelerator::unwrap_model(nn::Module& model) const {
  if (auto* ddp = dynamic_cast<DistributedDataParallel*>(&model)) return ddp->module();
  return model;
}

void Accelerator::save_state(const std::string& path, nn::Module& model, optim::Metadata metadata) {
  for (const char* reserved : {"scheduler", "rng", "grad_scaler"})
    SG_CHECK(metadata.count(reserved) == 0, "Accelerator::save_state: the metadata key '", reserved,
             "' is reserved for the accelerator's own state");
  if (scheduler_ != nullptr) {
    const auto state = scheduler_->state_dict();
    metadata["scheduler"] = nlohmann::json{{"last_epoch", state.last_epoch}, {"base_lrs", state.base_lrs}}.dump();
  }
  if (scaler_.is_enabled()) metadata["grad_scaler"] = scaler_.state_dict().to_json();
  const Generator& generator = default_generator();
  metadata["rng"] = nlohmann::json{{"seed", generator.seed()}, {"offset", generator.offset()}}.dump();
  // Every rank holds the same state after a step; one writer, and nobody reads before it is done.
  if (is_main_process()) optim::save_checkpoint(path, unwrap_model(model), optimizer_, metadata);
  wait_for_everyone();
}

optim::Metadata Accelerator::load_state(const std::string& path, nn::Module& model) {
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
    restore_entry(path, metadata, "rng", [](const std::string& text) {
      const auto json = nlohmann::json::parse(text);
      default_generator().manual_seed(json.at("seed").get<uint64_t>());
      default_generator().set_offset(json.at("offset").get<uint64_t>());
    });
  }
  if (scaler_.is_enabled() && metadata.count("grad_scaler") == 1) {
    restore_entry(path, metadata, "grad_scaler",
                  [&](const std::string& text) { scaler_.load_state_dict(amp::GradScalerState::from_json(text)); });
  }
  for (const char* reserved : {"scheduler", "rng", "grad_scaler"}) metadata.erase(reserved);
  return metadata;
}

}  // namespace sg::dist
