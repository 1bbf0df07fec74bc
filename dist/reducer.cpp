// Note [How DDP overlaps communication with backward]
// Backward produces gradients last layer first. Each parameter has a post-accumulate hook
// (autograd/node.h) that copies its fresh .grad into its bucket; when a bucket's last gradient
// arrives, its all-reduce is handed to the process group's communication thread and backward
// goes on computing earlier layers while the bytes travel. Buckets are launched strictly in
// index order — every rank must issue collectives in the same order, and hooks can fire in
// different orders on different ranks — so a bucket that fills early waits for its
// predecessors. When backward's last node has run, finalize() (queued with
// autograd::queue_callback) waits for every bucket and copies the averages back into .grad.
#include "dist/reducer.h"

#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "dist/chrome_trace.h"

namespace sg::dist {

namespace {
double milliseconds_between(ChromeTrace::Clock::time_point begin, ChromeTrace::Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - begin).count();
}
}  // namespace

std::vector<std::vector<size_t>> assign_buckets(const TensorList& params, size_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t bucket_bytes = 0;
  for (size_t i = params.size(); i-- > 0;) {
    const size_t bytes = static_cast<size_t>(params[i].numel()) * params[i].element_size();
    const bool start_new = buckets.empty() || params[buckets.back().front()].dtype() != params[i].dtype() ||
                           (bucket_bytes > 0 && bucket_bytes + bytes > cap_bytes);
    if (start_new) {
      buckets.emplace_back();
      bucket_bytes = 0;
    }
    buckets.back().push_back(i);
    bucket_bytes += bytes;
  }
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
      ready_(params_.size(), false) {
  for (const auto& members : assign_buckets(params_, bucket_cap_bytes)) {
    Bucket bucket;
    int64_t numel = 0;
    for (size_t slot = 0; slot < members.size(); ++slot) {
      const size_t p = members[slot];
      bucket_of_[p] = buckets_.size();
      slot_of_[p] = slot;
      bucket.params.push_back(p);
      bucket.offsets.push_back(numel);
      numel += params_[p].numel();
    }
    bucket.buffer = zeros({numel}, {params_[members.front()].dtype(), params_[members.front()].device()});
    buckets_.push_back(std::move(bucket));
  }
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t p = 0; p < params_.size(); ++p)
    params_[p].register_post_accumulate_grad_hook([weak, p](Tensor&) {
      if (auto reducer = weak.lock()) reducer->mark_ready(p);  // a dead DDP leaves grads alone
    });
}

void Reducer::prepare_for_backward(bool sync) {
  sync_ = sync;
  expecting_backward_ = true;
  finalize_queued_ = false;
  next_bucket_to_launch_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.work = nullptr;
  }
}

void Reducer::mark_backward_start() { backward_started_ = ChromeTrace::Clock::now(); }

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
  Bucket& bucket = buckets_[bucket_of_[p]];
  const Tensor& grad = params_[p].grad();
  bucket.buffer.narrow(0, bucket.offsets[slot_of_[p]], grad.numel()).view(grad.sizes()).copy_(grad);
  if (--bucket.pending == 0) {
    bucket.ready_at = ChromeTrace::Clock::now();
    launch_ready_buckets();
  }
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_to_launch_ < buckets_.size() && buckets_[next_bucket_to_launch_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_to_launch_++];
    bucket.work = group_.all_reduce(bucket.buffer, ReduceOp::AVG);
  }
}

void Reducer::finalize() {
  expecting_backward_ = false;
  const auto backward_done = ChromeTrace::Clock::now();
  NoGradGuard no_grad;

  // Parameters that got no gradient in this backward: with find_unused_parameters they take
  // part with zeros (every rank must still send every bucket); without it, a bucket that never
  // fills would leave the other ranks waiting for a collective that never comes, so name them.
  std::vector<size_t> unused;
  for (size_t p = 0; p < params_.size(); ++p)
    if (!ready_[p]) unused.push_back(p);
  if (!unused.empty() && !find_unused_parameters_) {
    std::ostringstream names;
    for (size_t i = 0; i < unused.size(); ++i) names << (i ? ", " : "") << "'" << names_[unused[i]] << "'";
    SG_CHECK(false, "DistributedDataParallel (rank ", group_.rank(), "): ", unused.size(),
             " parameter(s) received no gradient in this backward: ", names.str(),
             ". If the forward does not use them every step, construct DDP with find_unused_parameters = true; "
             "otherwise make sure the loss depends on them.");
  }
  // Which parameters some rank used: a parameter no rank used keeps its .grad as it was
  // (undefined, so the optimizer skips it), as in PyTorch.
  Tensor used_anywhere;
  if (find_unused_parameters_) {
    Tensor used_here = empty({static_cast<int64_t>(params_.size())}, {DType::i32});
    for (size_t p = 0; p < params_.size(); ++p) used_here.data_ptr<int32_t>()[p] = ready_[p] ? 1 : 0;
    used_anywhere = used_here.to(group_.device());
    for (size_t p : unused) {
      Bucket& bucket = buckets_[bucket_of_[p]];
      bucket.buffer.narrow(0, bucket.offsets[slot_of_[p]], params_[p].numel()).zero_();
      --bucket.pending;
    }
    launch_ready_buckets();
    group_.all_reduce(used_anywhere, ReduceOp::MAX)->wait();  // after the buckets: same order on every rank
    used_anywhere = used_anywhere.to(Device::cpu());          // read on the host below
  }

  for (Bucket& bucket : buckets_) {
    bucket.work->wait();
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const size_t p = bucket.params[slot];
      if (used_anywhere.defined() && used_anywhere.data_ptr<int32_t>()[p] == 0) continue;
      Tensor& param = params_[p];
      const Tensor averaged = bucket.buffer.narrow(0, bucket.offsets[slot], param.numel()).view(param.sizes());
      if (param.grad().defined()) param.mutable_grad().copy_(averaged);
      else param.set_grad(averaged.clone());
    }
  }

  last_step_times_ = {};
  last_step_times_.backward_ms = milliseconds_between(backward_started_, backward_done);
  last_step_times_.wait_ms = milliseconds_between(backward_done, ChromeTrace::Clock::now());
  for (const Bucket& bucket : buckets_) {
    const auto timing = bucket.work->timing();
    last_step_times_.all_reduce_ms += milliseconds_between(timing.started, timing.finished);
  }
  if (trace_) record_trace(backward_done);
}

void Reducer::trace_to(const std::string& path, int steps) {
  SG_CHECK(steps > 0, "DistributedDataParallel: trace steps must be positive, got ", steps);
  trace_ = std::make_shared<ChromeTrace>(group_.rank());
  trace_path_ = path;
  trace_steps_left_ = steps;
}

void Reducer::record_trace(ChromeTrace::Clock::time_point backward_done) {
  trace_->add_span("backward", "backward", backward_started_, backward_done);
  trace_->add_span("backward", "wait for all-reduce", backward_done, ChromeTrace::Clock::now());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    const auto timing = bucket.work->timing();
    if (timing.finished == ChromeTrace::Clock::time_point{}) continue;  // the backend keeps no times
    const double ready_ms = milliseconds_between(backward_started_, bucket.ready_at);
    const std::string detail = std::to_string(bucket.params.size()) + " tensors, " +
                               std::to_string(bucket.buffer.numel() * bucket.buffer.element_size()) + " bytes, ready " +
                               std::to_string(ready_ms) + " ms after backward began";
    trace_->add_span("all-reduce", "all_reduce bucket " + std::to_string(b), timing.started, timing.finished, detail);
  }
  if (--trace_steps_left_ == 0) {
    trace_->gather_and_write(group_, trace_path_);  // a collective, at the same step on every rank
    trace_.reset();
  }
}

}  // namespace sg::dist
