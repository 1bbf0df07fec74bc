#include "dist/ddp.h"

#include <algorithm>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "dist/dist.h"
#include "dist/exchange.h"
#include "dist/replica_check.h"
#include "dist/run_fingerprint.h"

namespace sg::dist {

namespace {

// "name shape dtype" per parameter, one per line: what must agree across ranks.
std::string describe_parameters(const nn::NamedTensors& params) {
  std::ostringstream out;
  for (const auto& [name, p] : params) out << name << " " << shape_str(p.sizes()) << " " << p.dtype() << "\n";
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every rank compares every rank's description with rank 0's, so all of them fail together
// with the same message (a rank that failed alone would leave the others hanging).
void check_same_parameters_everywhere(ProcessGroup& group, const nn::NamedTensors& params) {
  const std::vector<std::string> descriptions = all_gather_strings(group, describe_parameters(params));
  std::ostringstream differences;
  const std::vector<std::string> reference = lines_of(descriptions[0]);
  for (size_t r = 1; r < descriptions.size(); ++r) {
    if (descriptions[r] == descriptions[0]) continue;
    const std::vector<std::string> theirs = lines_of(descriptions[r]);
    if (theirs.size() != reference.size())
      differences << "\n  rank " << r << " has " << theirs.size() << " parameters, rank 0 has " << reference.size();
    for (size_t i = 0; i < std::min(theirs.size(), reference.size()); ++i)
      if (theirs[i] != reference[i])
        differences << "\n  parameter " << i << ": rank 0 has '" << reference[i] << "', rank " << r << " has '"
                    << theirs[i] << "'";
  }
  SG_CHECK(differences.str().empty(),
           "DistributedDataParallel: the ranks hold different models (every rank must build the same one):",
           differences.str());
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options,
                                                 ProcessGroup* group)
    : module_(std::move(module)),
      group_(group ? *group : default_group()),
      options_(std::move(options)) {
  SG_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  SG_CHECK(options_.bucket_cap_mb > 0, "DistributedDataParallel: bucket_cap_mb must be positive, got ",
           options_.bucket_cap_mb);
  SG_CHECK(options_.check_replicas_every >= 0,
           "DistributedDataParallel: check_replicas_every must be 0 (never) or a number of steps, got ",
           options_.check_replicas_every);
  register_module("module", module_);

  const nn::NamedTensors named = module_->named_parameters();
  // The buckets and the buffer broadcast live on the group's device: a model elsewhere (on a GPU
  // under a Gloo group, or on the CPU under an NCCL one) would get gradients on another device.
  nn::NamedTensors placed = named;
  for (const auto& buffer : module_->named_buffers()) placed.push_back(buffer);
  for (const auto& [name, tensor] : placed)
    SG_CHECK(tensor.device() == group_.device(), "DistributedDataParallel: '", name, "' is on ", tensor.device().str(),
             ", but the process group (", group_.backend_name(), ") works on ", group_.device().str(),
             ": move the model to the group's device before wrapping it");
  check_same_parameters_everywhere(group_, named);
  // Options that differ would hang or corrupt the all-reduce: other bucket boundaries, a
  // find_unused_parameters all-reduce or a buffer broadcast on some ranks only.
  RunFingerprint settings;
  settings.add("ddp.bucket_cap_mb", options_.bucket_cap_mb);
  settings.add("ddp.find_unused_parameters", options_.find_unused_parameters);
  settings.add("ddp.broadcast_buffers", options_.broadcast_buffers);
  settings.add("ddp.check_replicas_every", options_.check_replicas_every);  // the check is a collective
  check_ranks_agree(group_, settings, "DistributedDataParallel");           // Note [Ranks agree on the run's settings]
  // Same starting point everywhere: rank 0's initial weights and buffers.
  TensorList state = module_->parameters();
  for (const Tensor& b : module_->buffers()) state.push_back(b);
  broadcast_coalesced(group_, state, 0);

  TensorList trainable;
  std::vector<std::string> names;
  for (const auto& [name, p] : named)
    if (p.requires_grad()) {
      trainable.push_back(p);
      names.push_back(name);
      trainable_.emplace_back("module." + name, p);
    }
  reducer_ =
      std::make_shared<Reducer>(trainable, names, group_, static_cast<size_t>(options_.bucket_cap_mb * 1024 * 1024),
                                options_.find_unused_parameters);
  reducer_->install_hooks();
  reducer_->set_check_nonfinite_before_average(options_.find_nonfinite_origin);
  timeline_ = std::make_shared<BackwardTimeline>(group_);
  if (!options_.trace_path.empty()) timeline_->trace_to(options_.trace_path, options_.trace_steps);
  reducer_->set_observer(timeline_);
}

// Note [Buffers travel during backward]
// PyTorch broadcasts rank 0's buffers (BatchNorm statistics) synchronously before each forward:
// a second point per step, besides the gradient all-reduce, where every rank waits for the
// slowest. Here the broadcast starts right after a training forward, carrying the statistics
// that forward just updated on rank 0, and travels on the communication thread while backward
// runs (which reads only what forward saved, never the buffers). It lands at the end of
// backward, or at the latest when the next forward begins. Every rank then holds rank 0's
// buffers between steps, as with PyTorch, and no rank waits for another before its forward.
Tensor DistributedDataParallel::forward(const Tensor& input) {
  return call([&] { return (*module_)(input); });
}

void DistributedDataParallel::begin_forward() {
  buffer_broadcast_.finish();
  if (!GradMode::is_enabled()) return;
  check_replicas_if_due();
  reducer_->prepare_for_backward(sync_gradients_);
}

// Note [When the replicas are checked]
// check_replicas_every counts synchronised backwards (the reducer's finalize), not forwards:
// every rank finishes the same number of them, since each one all-reduces with all the ranks,
// whereas forwards also include no_sync micro-batches and evaluations that some ranks may run
// alone. One synchronised backward is one optimizer step, under gradient accumulation too. The
// check itself runs at the start of the next training forward (grad mode on, train mode): by then
// that step's optimizer update is done and the buffer broadcast has landed, and no collective is
// in flight, so its all-gather takes the same place in every rank's sequence of collectives. Of
// the micro-batches of one step, only the first forward checks.
void DistributedDataParallel::check_replicas_if_due() {
  const int64_t every = options_.check_replicas_every, step = reducer_->synchronised_backwards();
  if (every == 0 || !is_training() || step == last_checked_step_ || step % every != 0) return;
  std::ostringstream where;
  where << "DistributedDataParallel: replica check after step " << step << " (check_replicas_every = " << every
        << "; they agreed "
        << (last_checked_step_ == 0 ? std::string("when DDP was built")
                                    : "after step " + std::to_string(last_checked_step_))
        << ")";
  last_checked_step_ = step;
  compare_replicas({}, where.str());
}

void DistributedDataParallel::check_replicas(const nn::NamedTensors& optimizer_state) {
  buffer_broadcast_.finish();
  compare_replicas(optimizer_state, "DistributedDataParallel::check_replicas after step " +
                                        std::to_string(reducer_->synchronised_backwards()));
}

// One group per bucket, hashed into one word for the first exchange (Note [Replicas stay
// identical] in dist/replica_check.h), in reverse bucket order, which is about registration
// order, so the error names the earliest layer that differs; then the parameters DDP does not
// average (frozen when it was built) with the buffers, then the optimizer's state.
void DistributedDataParallel::compare_replicas(const nn::NamedTensors& optimizer_state, const std::string& where) {
  std::vector<nn::NamedTensors> groups;
  const std::vector<Bucket>& buckets = reducer_->buckets();
  for (auto bucket = buckets.rbegin(); bucket != buckets.rend(); ++bucket) {
    nn::NamedTensors& tensors = groups.emplace_back();
    for (size_t p : bucket->params) tensors.push_back(trainable_[p]);
  }
  nn::NamedTensors& others = groups.emplace_back();
  for (const auto& parameter : named_parameters())
    if (std::none_of(trainable_.begin(), trainable_.end(),
                     [&](const auto& averaged) { return averaged.second.is_same(parameter.second); }))
      others.push_back(parameter);
  for (const auto& buffer : named_buffers()) others.push_back(buffer);
  groups.push_back(optimizer_state);
  check_replicas_agree(group_, groups, where);
}

// Backward reaches the outputs first, so a hook on each output marks its start. Of several
// outputs (logits and a loss computed from them), the first one reached marks it; the others,
// if backward reaches them at all, find the flag set.
void DistributedDataParallel::end_forward(const TensorList& outputs) {
  // Buffers change only in training (BatchNorm statistics), and a rank-0-only evaluation must
  // not issue a collective the other ranks never join: broadcast them in training forwards only.
  if (options_.broadcast_buffers && is_training())
    buffer_broadcast_ = CoalescedBroadcast(group_, module_->buffers(), 0);
  if (!GradMode::is_enabled()) return;
  auto backward_started = std::make_shared<bool>(false);
  for (Tensor output : outputs) {
    if (!output.defined() || !output.requires_grad()) continue;
    output.register_hook([this, backward_started, alive = std::weak_ptr<Reducer>(reducer_)](const Tensor&) {
      auto reducer = alive.lock();  // the reducer lives exactly as long as this DDP
      if (!reducer || *backward_started) return Tensor();
      *backward_started = true;
      reducer->mark_backward_start();
      // Queued before any gradient is ready, so this end-of-backward callback runs first, before
      // the reducer's finalize (queued by the first ready gradient; callbacks run in queue order).
      autograd::queue_callback([this, alive] {
        if (!alive.expired()) buffer_broadcast_.finish();
      });
      return Tensor();
    });
  }
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_gradients_) {
  ddp_.sync_gradients_ = false;
}

DistributedDataParallel::NoSync::~NoSync() { ddp_.sync_gradients_ = previous_; }

}  // namespace sg::dist
