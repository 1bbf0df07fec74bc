// ZeroRedundancyOptimizer's stage-2 half (train/zero_redundancy_optimizer.h): the DDP
// communication hook that reduce-scatters each gradient bucket, and the clip that knows only the
// owned gradients are averaged.
//
// Note [ZeRO-2: each rank receives only its shard's gradients]
// Under ZeRO-1 DDP all-reduces every bucket, so every rank receives the average of every
// gradient, yet each rank steps only the parameters it owns (Note [ZeRO-1: what is sharded]).
// A reduce-scatter delivers only what is used: rank r receives the sum of chunk r of every rank's
// input, and nothing else. So, per bucket, this hook
//   1. groups the bucket's gradients by their owner rank; C is the largest owner's element count;
//   2. copies them into a staging buffer of P*C elements (P ranks), owner 0's gradients first,
//      each owner's run padded with zeros to C:   | owner 0 .. 0 | owner 1 .. 0 | owner 2 ... |
//   3. reduce-scatters it with AVG into a C-element output: rank r gets the average of its run;
//   4. when the Work is waited for (dist::then), copies that average back into the bucket slices
//      of the gradients rank r owns, where their .grad reads it.
// The other slices of the bucket keep this rank's own, unaveraged sum: never read by the step
// (which hides them, as ZeRO-1 does), and marked with GradBucket::leave_unaveraged, so that DDP's
// Reducer::holds_average answers false for them; the Reducer also marks their parameters
// (AutogradMeta::partial_grad_reason) until the next forward, so that what would read them as
// whole gradients refuses with a clear error. What follows from that, consumer by consumer:
//   - clipping: optim::clip_grad_norm_ would mix averages and local sums, and refuses; clip with
//     ZeroRedundancyOptimizer::clip_grad_norm_ (each rank's owned squared norm, summed over the
//     ranks in one all-reduce: the plain run's global norm). Accelerator::clip_grad_norm_ does so.
//   - the f16 loss scaler: an inf in a gradient another rank owns reaches its owner's average but
//     not this rank's slices, so the ranks' found_inf could differ. With zero_shard_gradients the
//     Accelerator's agreement all-reduces found_inf on every step (holds_average, which differs
//     from rank to rank here, is not asked). A GradScaler used without an agreement
//     (GradScalerOptions::agree_across_ranks) would let the ranks disagree on skipping a step, and
//     the ranks that step would wait in the parameters' all-gather for those that skipped: such a
//     scaler refuses the marked gradients. Pair stage 2 with the Accelerator, or give the scaler
//     an agreement.
//   - finding the rank an overflow came from: the check runs before the hook, on local gradients,
//     as before.
//   - gradient accumulation with no_sync: the hook runs only on the synchronised backward, on the
//     sum accumulated in the bucket, so the owner receives the average of the sums, as plain DDP.
//     Every step must start from zeroed gradients (zero_grad), as every training loop does: a
//     local sum left in a slice would otherwise be added into the next step's.
//   - DDP's replica check compares parameters (equal again after the step's all-gather), not
//     gradients.
//
// What it costs. A reduce-scatter sends (P-1)/P of its input per rank, an all-reduce twice that
// of its tensor: the staging buffer (P*C) is cheaper than the bucket's all-reduce while
// P*C <= 2 * the bucket's element count. Whole parameters make some buckets lopsided — a bucket
// that one rank owns entirely has C = its size, P*C = P times it — so a bucket beyond that bound
// is all-reduced as under ZeRO-1 (its gradients all averaged); buckets_all_reduced() counts them.
// So does a bucket holding a parameter this optimizer does not step. Across machines Gloo has no
// reduce-scatter of its own here (ProcessGroupGloo::start_reduce_scatter_tensor all-reduces the
// staging buffer and keeps a chunk), so there stage 2 moves more bytes than stage 1, not fewer;
// on one machine the shared memory's reduce-scatter and NCCL's are real ones. On all, the other half of ZeRO-2's saving
// — the gradient memory, each rank keeping only its shard's — is not taken: the buckets stay whole, as DDP allocates
// them.
#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "optim/clip_grad.h"
#include "train/zero_redundancy_optimizer.h"

namespace sg::dist {

// What the hook needs of the partition, and what it counts; shared by the optimizer and its hook,
// which DDP may keep longer.
struct ZeroRedundancyOptimizer::GradientTraffic {
  TensorList params;                                    // kept alive: their TensorImpls are the keys
  std::unordered_map<const TensorImpl*, int> owner_of;  // per parameter: the rank that steps it
  int64_t reduce_scattered = 0, all_reduced = 0;        // buckets, so far
};

// Note [ZeRO-2: each rank receives only its shard's gradients], steps 1-4.
WorkPtr ZeroRedundancyOptimizer::reduce_scatter_bucket(ProcessGroup& group, GradBucket& bucket,
                                                       GradientTraffic& traffic) {
  const int world = group.size(), rank = group.rank();
  const TensorList& gradients = bucket.gradients();
  std::vector<int> owners;
  std::vector<int64_t> owned_numel(static_cast<size_t>(world), 0);
  for (const Tensor& param : bucket.parameters()) {
    const auto it = traffic.owner_of.find(param.impl());
    if (it == traffic.owner_of.end()) break;  // not this optimizer's: all-reduced below
    owners.push_back(it->second);
    owned_numel[static_cast<size_t>(it->second)] += param.numel();
  }
  const int64_t chunk = *std::max_element(owned_numel.begin(), owned_numel.end());
  if (owners.size() < gradients.size() || world * chunk > 2 * bucket.buffer().numel()) {
    ++traffic.all_reduced;
    return group.all_reduce(bucket.buffer(), ReduceOp::AVG);
  }
  ++traffic.reduce_scattered;
  NoGradGuard no_grad;
  const TensorOptions options{bucket.buffer().dtype(), bucket.buffer().device()};
  Tensor staging = empty({world * chunk}, options);  // every element is written below: a gradient or padding
  std::vector<int64_t> next(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) next[static_cast<size_t>(r)] = r * chunk;
  std::vector<std::pair<Tensor, int64_t>> owned;  // this rank's gradients, each with its offset in the chunk
  for (size_t i = 0; i < gradients.size(); ++i) {
    const int64_t numel = gradients[i].numel();
    int64_t& offset = next[static_cast<size_t>(owners[i])];
    staging.narrow(0, offset, numel).copy_(gradients[i].view({numel}));
    if (owners[i] == rank) owned.emplace_back(gradients[i], offset - rank * chunk);
    else bucket.leave_unaveraged(i);
    offset += numel;
  }
  for (int r = 0; r < world; ++r) {  // each owner's run padded with zeros to the chunk
    const int64_t end = next[static_cast<size_t>(r)], chunk_end = (r + 1) * chunk;
    if (end < chunk_end) staging.narrow(0, end, chunk_end - end).zero_();
  }
  Tensor average = empty({chunk}, options);
  WorkPtr work = group.reduce_scatter_tensor(average, staging, ReduceOp::AVG);
  return then(std::move(work), [staging, average, owned]() mutable {
    NoGradGuard no_grad;
    for (auto& [gradient, offset] : owned)
      gradient.view({gradient.numel()}).copy_(average.narrow(0, offset, gradient.numel()));
  });
}

CommHook ZeroRedundancyOptimizer::reduce_scatter_gradients_hook() {
  if (gradient_traffic_ == nullptr) {
    gradient_traffic_ = std::make_shared<GradientTraffic>();
    gradient_traffic_->params = params_;
    for (size_t i = 0; i < params_.size(); ++i) gradient_traffic_->owner_of[params_[i].impl()] = owners_[i];
  }
  return [traffic = gradient_traffic_](ProcessGroup& group, GradBucket& bucket) {
    return reduce_scatter_bucket(group, bucket, *traffic);
  };
}

int64_t ZeroRedundancyOptimizer::buckets_reduce_scattered() const {
  return gradient_traffic_ ? gradient_traffic_->reduce_scattered : 0;
}

int64_t ZeroRedundancyOptimizer::buckets_all_reduced() const {
  return gradient_traffic_ ? gradient_traffic_->all_reduced : 0;
}

// optim::clip_grad_norm_'s arithmetic, over the owned gradients, with the per-rank partial norm
// combined across the ranks: a sum of |g|^p, or the max for the inf norm. A NaN travels as a flag
// beside the partial norm, since a reduction with MAX need not carry it.
double ZeroRedundancyOptimizer::clip_grad_norm_(const TensorList& params, double max_norm, double norm_type) {
  NoGradGuard no_grad;
  const bool inf_norm = std::isinf(norm_type);
  TensorList owned;
  for (size_t k = 0; k < params.size(); ++k) {
    const auto it = index_of_.find(params[k].impl());
    SG_CHECK(it != index_of_.end(), type_name(), ".clip_grad_norm_ (rank ", group_.rank(), "): parameter ", k,
             " of shape ", shape_str(params[k].sizes()),
             " is not one of this optimizer's, so no rank owns its gradient; clip the optimizer's parameters");
    if (owners_[it->second] != group_.rank() || !params[k].grad().defined()) continue;
    owned.push_back(params[k].grad());
  }
  const double partial = owned.empty() ? 0.0 : optim::summed_norm_powers(owned, norm_type).item();
  const bool nan_here = std::isnan(partial);
  Tensor combined = empty({2}, {DType::f64});
  combined.data_ptr<double>()[0] = nan_here ? 0.0 : partial;
  combined.data_ptr<double>()[1] = nan_here ? 1.0 : 0.0;
  Tensor on_group_device = combined.to(group_.device());
  group_.all_reduce(on_group_device, inf_norm ? ReduceOp::MAX : ReduceOp::SUM)->wait();
  combined = on_group_device.to(Device::cpu());
  const double* values = combined.data_ptr<double>();
  const double total_norm = values[1] > 0 ? std::nan("") : inf_norm ? values[0] : std::pow(values[0], 1.0 / norm_type);
  const double clip_coef = max_norm / (total_norm + 1e-6);
  const double clip_coef_clamped = clip_coef > 1.0 ? 1.0 : clip_coef;  // NaN stays NaN, as torch.clamp
  for (Tensor& grad : owned) grad.mul_(clip_coef_clamped);
  return total_norm;
}

}  // namespace sg::dist
