// Note [How DDP overlaps communication with backward]
// Backward produces gradients last layer first. Each parameter has a post-accumulate hook
// (autograd/node.h) that makes sure its fresh .grad is in its bucket; when a bucket's last
// gradient arrives, its all-reduce is handed to the process group's communication thread and
// backward goes on computing earlier layers while the bytes travel. Buckets are launched strictly
// in index order — every rank must issue collectives in the same order, and hooks can fire in
// different orders on different ranks — so a bucket that fills early waits for its
// predecessors. When backward's last node has run, finalize() (queued with
// autograd::queue_callback) waits for every bucket; the averages are then in .grad already.
//
// Note [Gradients are views into their buckets]
// Each parameter's .grad is its slice of its bucket (PyTorch's gradient_as_bucket_view), so the
// averages land in .grad with no copy out. How a gradient gets into the bucket depends on what
// .grad is when backward reaches the parameter:
//   - the bucket view (after zero_grad(set_to_none = false), or while gradients accumulate): the
//     autograd engine adds the new gradient into .grad in place, that is into the bucket: no copy;
//   - undefined (after zero_grad(), whose set_to_none is true by default, as in PyTorch): a
//     backward function that asks (conv2d's weight, a matrix product's second operand, a Linear's
//     weight through its .t()) writes the gradient straight into the view, each parameter's
//     grad_home (Note [A gradient written where it lands] in autograd/engine.cpp), and .grad is
//     the view already. Otherwise the engine adopts the freshly
//     computed gradient as .grad; the hook copies it into the bucket once and points .grad back at
//     the view, as PyTorch does (zeroing the view and adding into it instead would cost at least
//     as much as the copy);
//   - another tensor (given with set_grad): copied and re-pointed the same way.
// Optimizers, clip_grad_norm_, the loss scaler and Module::load_state_dict write into .grad (or
// the parameter) in place and never replace it, so .grad stays a view between steps.
//
// Note [Communication hooks]
// What happens to a full bucket is replaceable, as in PyTorch: a hook registered with
// DistributedDataParallel::register_comm_hook gets the bucket (dist/comm_hook.h) in place of
// the all-reduce with AVG, and returns a Work that finalize() waits for like the all-reduce's.
// Its wait() must leave the average in the bucket, where .grad reads it. The hook is called
// where the all-reduce would be issued — strictly in bucket order, once per bucket, only in
// synchronised backwards (no_sync never reaches it) and, with find_unused_parameters, for the
// buckets finalize() completes too — so it may issue collectives of its own and every rank
// still issues them in the same order. It is fixed before the first synchronised backward so
// that every average of a run came from the same hook.
#include "dist/reducer.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "autograd/anomaly_mode.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/factory.h"
#include "core/profiler.h"

namespace sg::dist {

namespace {
// AutogradMeta::partial_grad_reason of a gradient the communication hook left unaveraged.
constexpr const char* kLeftUnaveraged =
    "DDP's communication hook left this rank's own sum in it, unaveraged; the average went to the rank that owns "
    "the parameter (ZeroRedundancyOptimizer's gradient sharding, ZeRO-2)";
}  // namespace

std::vector<std::vector<size_t>> assign_buckets(const TensorList& params, size_t cap_bytes) {
  constexpr size_t kFirstBucketBytes = size_t(1) << 20;
  struct OpenBucket {
    std::vector<size_t> members;
    size_t bytes = 0;
    bool first = true;  // no bucket of this dtype closed yet
  };
  std::map<DType, OpenBucket> open;
  std::vector<std::vector<size_t>> buckets;
  for (size_t i = 0; i < params.size(); ++i) {
    OpenBucket& bucket = open[params[i].dtype()];
    bucket.members.push_back(i);
    bucket.bytes += static_cast<size_t>(params[i].numel()) * params[i].element_size();
    const size_t limit = bucket.first ? std::min(kFirstBucketBytes, cap_bytes) : cap_bytes;
    if (bucket.bytes >= limit) {
      buckets.push_back(std::move(bucket.members));
      bucket = OpenBucket{.members = {}, .bytes = 0, .first = false};
    }
  }
  for (auto& [dtype, bucket] : open)
    if (!bucket.members.empty()) buckets.push_back(std::move(bucket.members));
  // Last-registered first: by each bucket's first parameter, descending.
  std::sort(buckets.begin(), buckets.end(), [](const auto& a, const auto& b) { return a.front() > b.front(); });
  return buckets;
}

Reducer::Reducer(TensorList params, std::vector<std::string> names, ProcessGroup& group, size_t bucket_cap_bytes,
                 bool find_unused_parameters)
    : params_(std::move(params)),
      names_(std::move(names)),
      group_(group),
      find_unused_parameters_(find_unused_parameters),
      bucket_of_(params_.size()),
      slot_of_(params_.size()),
      ready_(params_.size(), false),
      averaged_by_hook_(params_.size(), true) {
  for (const auto& members : assign_buckets(params_, bucket_cap_bytes)) {
    Bucket bucket;
    int64_t numel = 0;
    for (size_t p : members) numel += params_[p].numel();
    bucket.buffer = group_.zeros_for_all_reduce(numel, params_[members.front()].dtype());
    int64_t offset = 0;
    for (size_t slot = 0; slot < members.size(); ++slot) {
      const size_t p = members[slot];
      bucket_of_[p] = buckets_.size();
      slot_of_[p] = slot;
      bucket.params.push_back(p);
      bucket.views.push_back(bucket.buffer.narrow(0, offset, params_[p].numel()).view(params_[p].sizes()));
      offset += params_[p].numel();
    }
    buckets_.push_back(std::move(bucket));
  }
  NoGradGuard no_grad;
  for (size_t p = 0; p < params_.size(); ++p)
    if (params_[p].grad().defined()) point_grad_at_bucket(p);
}

Reducer::~Reducer() {
  for (size_t p = 0; p < params_.size(); ++p) {
    autograd::AutogradMeta* meta = autograd::meta_of(params_[p]);
    if (meta == nullptr) continue;
    if (meta->grad_home.is_same(buckets_[bucket_of_[p]].views[slot_of_[p]])) meta->grad_home = Tensor();
    meta->partial_grad_reason.clear();
  }
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t p = 0; p < params_.size(); ++p) {
    params_[p].register_post_accumulate_grad_hook([weak, p](Tensor&) {
      if (auto reducer = weak.lock()) reducer->mark_ready(p);  // a dead DDP leaves grads alone
    });
    autograd::ensure_meta(params_[p]).grad_home = buckets_[bucket_of_[p]].views[slot_of_[p]];
  }
}

void Reducer::set_observer(std::shared_ptr<ReducerObserver> observer) {
  observer_ = observer ? std::move(observer) : std::make_shared<ReducerObserver>();
}

// Note [Communication hooks]
void Reducer::register_comm_hook(CommHook hook) {
  SG_CHECK(hook != nullptr, "DistributedDataParallel (rank ", group_.rank(), "): register_comm_hook got an empty hook");
  SG_CHECK(comm_hook_ == nullptr, "DistributedDataParallel (rank ", group_.rank(),
           "): register_comm_hook can only be called once; this DDP already has a communication hook");
  SG_CHECK(synchronised_backwards_ == 0 && !finalize_queued_,  // finalize_queued_: one is under way
           "DistributedDataParallel (rank ", group_.rank(),
           "): register_comm_hook must be called before the first synchronised backward, so that every "
           "gradient average of the run comes from the same hook (",
           synchronised_backwards_, " have finished); register it right after constructing DDP");
  comm_hook_ = std::move(hook);
}

void Reducer::prepare_for_backward(bool sync) {
  sync_ = sync;
  expecting_backward_ = true;
  finalize_queued_ = false;
  averaged_ = false;
  next_bucket_to_launch_ = 0;
  nonfinite_before_average_.clear();
  std::fill(ready_.begin(), ready_.end(), false);
  for (const Tensor& param : params_)
    if (auto* meta = autograd::meta_of(param)) meta->partial_grad_reason.clear();
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.work = nullptr;
  }
}

void Reducer::mark_backward_start() {
  if (expecting_backward_ && sync_) observer_->backward_started();
}

void Reducer::mark_ready(size_t p) {
  if (expecting_backward_ && !sync_) return;  // no_sync: gradients accumulate locally
  SG_CHECK(expecting_backward_, "DistributedDataParallel (rank ", group_.rank(), "): parameter '", names_[p],
           "' received a gradient from a backward that no DDP forward prepared (a second backward through "
           "one forward, with retain_graph?). Run the forward through DDP before every backward, so the "
           "replicas stay identical.");
  SG_CHECK(!ready_[p], "DistributedDataParallel (rank ", group_.rank(), "): parameter '", names_[p],
           "' received its gradient twice in one backward");
  ready_[p] = true;
  if (!finalize_queued_) {
    finalize_queued_ = true;
    autograd::queue_callback([weak = weak_from_this()] {
      if (auto reducer = weak.lock()) reducer->finalize();
    });
  }
  point_grad_at_bucket(p);
  slot_filled(bucket_of_[p]);
}

// Note [Gradients are views into their buckets]
void Reducer::point_grad_at_bucket(size_t p) {
  Tensor& param = params_[p];
  Tensor& view = buckets_[bucket_of_[p]].views[slot_of_[p]];
  if (param.grad().is_same(view)) return;  // backward accumulated straight into the bucket
  view.copy_(param.grad());
  param.set_grad(view);
}

void Reducer::slot_filled(size_t b) {
  if (--buckets_[b].pending > 0) return;
  if (check_nonfinite_before_average_) check_nonfinite(buckets_[b]);
  observer_->bucket_ready(b);
  launch_ready_buckets();
}

// Note [Finding the rank an overflow came from]: the bucket holds this rank's gradients alone
// until its all-reduce is launched, right after this.
void Reducer::check_nonfinite(const Bucket& bucket) {
  if (autograd::nonfinite_kind(bucket.buffer) == nullptr) return;
  for (size_t slot = 0; slot < bucket.params.size(); ++slot)
    if (autograd::nonfinite_kind(bucket.views[slot]) != nullptr)
      nonfinite_before_average_.push_back(bucket.params[slot]);
}

bool Reducer::was_nonfinite_before_average(const Tensor& param) const {
  return std::any_of(nonfinite_before_average_.begin(), nonfinite_before_average_.end(),
                     [&](size_t p) { return params_[p].is_same(param); });
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_to_launch_ < buckets_.size() && buckets_[next_bucket_to_launch_].pending == 0) {
    const size_t b = next_bucket_to_launch_++;
    buckets_[b].work = comm_hook_ ? run_comm_hook(b) : group_.all_reduce(buckets_[b].buffer, ReduceOp::AVG);
  }
}

// Note [Communication hooks]
WorkPtr Reducer::run_comm_hook(size_t b) {
  const Bucket& bucket = buckets_[b];
  TensorList parameters;
  for (size_t p : bucket.params) parameters.push_back(params_[p]);
  GradBucket grad_bucket(b, buckets_.size(), bucket.buffer, std::move(parameters), bucket.views);
  WorkPtr work = comm_hook_(group_, grad_bucket);
  SG_CHECK(work != nullptr, "DistributedDataParallel (rank ", group_.rank(), "): the communication hook returned no ",
           "Work for bucket ", b, " (", bucket.buffer.numel(), " gradient values); it must return the Work whose ",
           "wait() leaves their average in bucket.buffer()");
  for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
    const size_t p = bucket.params[slot];
    averaged_by_hook_[p] = grad_bucket.is_averaged(slot);
    if (!averaged_by_hook_[p]) autograd::ensure_meta(params_[p]).partial_grad_reason = kLeftUnaveraged;
  }
  return work;
}

// Runs after backward's last node, and after DDP's own end-of-backward callback (the buffer
// broadcast's finish, queued when backward reached the model's output, before any gradient was
// ready: callbacks run in the order they were queued).
void Reducer::finalize() {
  expecting_backward_ = false;
  observer_->backward_finished();
  NoGradGuard no_grad;
  std::vector<size_t> unused;  // parameters that got no gradient in this backward
  for (size_t p = 0; p < params_.size(); ++p)
    if (!ready_[p]) unused.push_back(p);
  // The exposed communication: backward is done and waits for what the all-reduces have not
  // finished (dist/step_report.h sums it per step).
  {
    const profiler::RecordScope waiting(kWaitForAllReduces, profiler::Category::collective);
    if (find_unused_parameters_) finish_with_unused_parameters(unused);
    else finish_with_every_parameter_used(unused);
  }
  averaged_ = true;
  ++synchronised_backwards_;
  observer_->gradients_averaged(buckets_);
}

// Without find_unused_parameters a parameter without a gradient is an error: its bucket would
// never fill, and the other ranks would wait for a collective that never comes, so name them.
void Reducer::finish_with_every_parameter_used(const std::vector<size_t>& unused) {
  if (!unused.empty()) {
    std::ostringstream names;
    for (size_t i = 0; i < unused.size(); ++i) names << (i ? ", " : "") << "'" << names_[unused[i]] << "'";
    SG_FAIL("DistributedDataParallel (rank ", group_.rank(), "): ", unused.size(),
            " parameter(s) received no gradient in this backward: ", names.str(),
            ". If the forward does not use them every step, construct DDP with find_unused_parameters = true; "
            "otherwise make sure the loss depends on them.");
  }
  for (Bucket& bucket : buckets_) bucket.work->wait();
}

// With find_unused_parameters each parameter without a gradient still takes part — every rank
// must send every bucket — with the .grad it holds (accumulated under no_sync, say) or with
// zeros. Afterwards it takes the average as .grad only if some rank held a gradient for it: one
// that holds none anywhere keeps its .grad undefined (so the optimizer skips it), as in PyTorch.
void Reducer::finish_with_unused_parameters(const std::vector<size_t>& unused) {
  for (size_t p : unused) {
    if (params_[p].grad().defined()) point_grad_at_bucket(p);
    else buckets_[bucket_of_[p]].views[slot_of_[p]].zero_();
    slot_filled(bucket_of_[p]);
  }
  Tensor held_here = empty({static_cast<int64_t>(params_.size())}, {DType::i32});
  for (size_t p = 0; p < params_.size(); ++p) held_here.data_ptr<int32_t>()[p] = params_[p].grad().defined();
  Tensor held_anywhere = held_here.to(group_.device());
  group_.all_reduce(held_anywhere, ReduceOp::MAX)->wait();  // after the buckets: same order on every rank
  held_anywhere = held_anywhere.to(Device::cpu());          // read on the host below
  for (Bucket& bucket : buckets_) bucket.work->wait();
  for (size_t p : unused)
    if (!params_[p].grad().defined() && held_anywhere.data_ptr<int32_t>()[p] != 0)
      params_[p].set_grad(buckets_[bucket_of_[p]].views[slot_of_[p]]);
}

bool Reducer::holds_average(const Tensor& grad) const {
  if (!averaged_ || !grad.defined()) return false;
  for (const Bucket& bucket : buckets_) {
    if (grad.storage() != bucket.buffer.storage()) continue;
    // Every parameter's gradient that `grad` overlaps must have been averaged.
    const int64_t begin = grad.storage_offset(), end = begin + grad.numel();
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const int64_t slot_begin = bucket.views[slot].storage_offset();
      const bool overlaps = begin < slot_begin + bucket.views[slot].numel() && slot_begin < end;
      if (overlaps && !averaged_by_hook_[bucket.params[slot]]) return false;
    }
    return true;
  }
  return false;
}

}  // namespace sg::dist
