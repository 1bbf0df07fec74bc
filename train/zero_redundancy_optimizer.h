#pragma once
// defines: dist::ZeroRedundancyOptimizer — ZeRO stage 1, as torch.distributed.optim.
//          ZeroRedundancyOptimizer: each rank keeps the optimizer state of only its shard of the
//          parameters and steps only that shard; the updated parameters are then all-gathered.
//          With reduce_scatter_gradients_hook (train/zero_gradient_shards.cpp), stage 2's
//          gradients: each rank receives, averaged, only the gradients of its shard.
//
//   auto model = std::make_shared<dist::DistributedDataParallel>(net);   // gradients all-reduced as usual
//   dist::ZeroRedundancyOptimizer optimizer(std::make_unique<optim::AdamW>(model->parameters()));
//   for (...) { ...; loss.backward(); optimizer.step(); optimizer.zero_grad(); }
//   model->register_comm_hook(optimizer.reduce_scatter_gradients_hook());  // optional: ZeRO-2's gradients
//   optimizer.consolidate_state_dict(0);                   // every rank: the shards travel to rank 0
//   if (dist::get_rank() == 0) save(optimizer.state_dict());  // a plain AdamW's state dict
//
// Note [ZeRO-1: what is sharded]
// Adam keeps two f32 tensors per parameter (exp_avg, exp_avg_sq): twice the model's bytes, on
// every rank, under plain DDP. Yet after DDP's all-reduce every rank holds the same gradients and
// computes the same update, so each rank may instead update only a shard of the parameters and
// keep only that shard's state: 1/N of it on each of N ranks. The parameters and the gradients
// stay whole on every rank (that is ZeRO stage 1; stage 2 shards the gradients, stage 3 the
// parameters too). reduce_scatter_gradients_hook gives stage 2's communication — each rank
// receives only its shard's averages — but not its memory: DDP's buckets stay whole.
//
// The partition is PyTorch's, by whole parameters: within each param group, the parameters are
// taken largest first (ties in registration order) and each goes to the rank that owns the fewest
// elements so far (the lowest such rank on a tie), counting across groups. Every rank computes the
// same partition from the shapes alone. Shards are as even as whole parameters allow.
//
// Note [ZeRO-1: syncing the parameters after the step]
// After each rank has updated its shard, every rank needs every parameter. Either each owner
// broadcasts its parameters (one collective per parameter, or per rank with coalescing), or the
// shards travel in one all-gather. This does the latter: each rank copies its shard into a flat
// buffer padded to the largest shard, all_gather_into_tensor puts every rank's buffer side by
// side, and each rank copies the others' shards out. One collective per step instead of one per
// parameter (a GPT has ~100; each Gloo collective also costs a store round trip for the failure
// report), at the price of the padding and two copies of the parameters. The buffers exist only
// during the step. That is why every parameter must have one dtype and lie on the group's device.
//
// Gradients come from DDP's all-reduce by default, as in PyTorch, and then clipping
// (optim::clip_grad_norm_) sees the full averaged gradients on every rank. ZeRO stage 2's
// gradient path is one call away: register reduce_scatter_gradients_hook() on the DDP (Note [ZeRO-2:
// each rank receives only its shard's gradients] in train/zero_gradient_shards.cpp). LR schedulers
// and the GradScaler address this optimizer like any other: its param groups are the wrapped
// optimizer's, and step() steps the shard.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dist/comm_hook.h"
#include "dist/process_group.h"
#include "optim/optimizer.h"

namespace sg::dist {

class ZeroRedundancyOptimizer final : public optim::Optimizer {
public:
  // Takes over `optimizer`, built as usual over every parameter (its param groups and
  // hyperparameters are this optimizer's). State it already holds is kept for this rank's shard
  // only. A collective: every rank of `group` (the default group when null) constructs it, with
  // parameters of the same shapes; all parameters must share one dtype and be contiguous on the
  // group's device.
  explicit ZeroRedundancyOptimizer(std::unique_ptr<optim::Optimizer> optimizer, ProcessGroup* group = nullptr);

  // The wrapped optimizer steps the parameters this rank owns (it skips the others, as it skips
  // any parameter without a gradient), then the shards are all-gathered. A collective.
  void step() override;

  size_t num_param_groups() const override { return optimizer_->num_param_groups(); }
  const TensorList& params(size_t group) const override { return optimizer_->params(group); }
  double lr(size_t group) const override { return optimizer_->lr(group); }
  void set_lr(size_t group, double lr) override { optimizer_->set_lr(group, lr); }
  optim::Hyperparameters hyperparameters(size_t group) const override { return optimizer_->hyperparameters(group); }
  void set_hyperparameters(size_t group, const optim::Hyperparameters& values) override {
    optimizer_->set_hyperparameters(group, values);
  }
  void check_hyperparameters(size_t group, const optim::Hyperparameters& values) const override {
    optimizer_->check_hyperparameters(group, values);
  }

  ProcessGroup& process_group() const { return group_; }
  // The partition (Note [ZeRO-1: what is sharded]): the rank owning all_params()[index], and the
  // parameter elements rank `rank` owns, whose state it keeps.
  int owner(size_t index) const { return owners_.at(index); }
  int64_t shard_numel(int rank) const { return shard_numels_.at(static_cast<size_t>(rank)); }
  int64_t total_numel() const;
  // The bytes of the optimizer state this rank holds now (none before the first step).
  int64_t local_state_bytes() const;

  // ZeRO stage 2's gradients, for DistributedDataParallel::register_comm_hook on the DDP whose
  // parameters this optimizer steps, on every rank, before its first backward: each bucket is
  // reduce-scattered so that this rank receives the average of only the gradients it owns; the
  // other gradients keep this rank's own, unaveraged sum (DDP's holds_average says so), which
  // the step does not read. From the call on shards_gradients() is true: clip through
  // clip_grad_norm_ below, not optim::clip_grad_norm_, whose norm would mix averaged and local
  // gradients (the Accelerator does so itself). Note [ZeRO-2: each rank receives only its shard's
  // gradients] in train/zero_gradient_shards.cpp.
  CommHook reduce_scatter_gradients_hook();
  bool shards_gradients() const { return gradient_traffic_ != nullptr; }
  // How the hook sent the buckets so far: reduce-scattered, or all-reduced where that costs less.
  int64_t buckets_reduce_scattered() const;
  int64_t buckets_all_reduced() const;

  // optim::clip_grad_norm_ over `params` (each one of this optimizer's), computed from the
  // gradients this rank owns, whose norms are summed over the ranks in one all-reduce: the same
  // global norm as a plain run's, with or without stage 2. Scales the owned gradients only (the
  // others are not stepped here). A collective: every rank calls it.
  double clip_grad_norm_(const TensorList& params, double max_norm, double norm_type = 2.0);

  // This rank's shard of the state, keyed as a plain optimizer's (global parameter indices).
  optim::OptimizerState local_state_dict() const { return optimizer_->state_dict(); }
  // Gathers every rank's shard onto rank `to`, where state_dict() then returns the whole state.
  // A collective: every rank calls it (the others receive each shard in turn and drop it, as in
  // PyTorch).
  void consolidate_state_dict(int to = 0);
  // The whole state, equal to the plain optimizer's (it loads into one): only on the rank
  // consolidate_state_dict gathered it to, and only until the next step or load. Throws
  // elsewhere, saying so, rather than return one shard as if it were the whole.
  optim::OptimizerState state_dict() const override;
  // Loads a whole state (a plain optimizer's, or a consolidated one); this rank keeps the state of
  // its shard. Each rank checks the groups and its shard's tensors. Not a collective.
  void load_state_dict(const optim::OptimizerState& state) override;
  // Empty: the shards differ from rank to rank by design, so DDP's replica check
  // (DistributedDataParallel::check_replicas) compares the parameters only.
  nn::NamedTensors named_state(const nn::NamedTensors& named_params) const override;

private:
  void partition();
  void check_same_parameters_on_every_rank() const;
  void all_gather_parameters();
  optim::OptimizerState keep_local_shard(const optim::OptimizerState& state) const;
  struct GradientTraffic;  // stage 2: the partition as the hook needs it, and its counts
  static WorkPtr reduce_scatter_bucket(ProcessGroup& group, GradBucket& bucket, GradientTraffic& traffic);

  std::unique_ptr<optim::Optimizer> optimizer_;
  ProcessGroup& group_;
  TensorList params_;                                       // all_params(), once
  std::vector<int> owners_;                                 // per parameter index
  std::vector<int64_t> shard_numels_;                       // per rank
  std::optional<optim::OptimizerState> consolidated_;       // on the rank consolidate_state_dict gathered to
  std::unordered_map<const TensorImpl*, size_t> index_of_;  // a parameter's index in params_
  std::shared_ptr<GradientTraffic> gradient_traffic_;       // shared with the hook; null until it is made
};

// For a program's start line, before any state exists: ", ZeRO-1 over 2 processes: optimizer
// state per rank 1.61 | 0.42 of 2.03 MB (whole parameters: 200704 | 53002 of 253706 elements)"
// when `optimizer` is a ZeroRedundancyOptimizer whose wrapped optimizer keeps
// `state_tensors_per_element` tensors shaped like each parameter (Adam 2, SGD with momentum 1);
// "" for any other optimizer.
std::string zero_sharding_note(const optim::Optimizer& optimizer, int state_tensors_per_element);

}  // namespace sg::dist
