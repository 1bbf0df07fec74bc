#pragma once
// defines: dist::GradBucket (what a DDP communication hook sees of one bucket), CommHook (a
//          hook's signature), then (a Work that finishes with a continuation: PyTorch's
//          Future.then). The built-in hooks are in dist/default_hooks.h; docs/ddp.md tells
//          the story (Note [Communication hooks] in dist/reducer.cpp).
#include <cstddef>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"

namespace sg::dist {

// One bucket of gradients, handed to a communication hook when it is ready to be sent
// (PyTorch's dist.GradBucket). The tensors are handles to the bucket's own memory: a hook may
// keep copies of them in its Work, which DDP waits for before backward returns.
class GradBucket {
public:
  GradBucket(size_t index, size_t bucket_count, Tensor buffer, TensorList parameters, TensorList gradients)
      : index_(index),
        bucket_count_(bucket_count),
        buffer_(std::move(buffer)),
        parameters_(std::move(parameters)),
        gradients_(std::move(gradients)),
        averaged_(gradients_.size(), true) {}

  // Buckets are sent in index order, 0 first, the same on every rank.
  size_t index() const { return index_; }
  // The bucket's last to be sent in this backward (the hook may flush state it batched up).
  bool is_last() const { return index_ + 1 == bucket_count_; }
  // Every gradient of the bucket, flat, of one dtype: this rank's sum when the hook is called;
  // the hook's Work must leave the average over the ranks here by the time wait() returns.
  Tensor& buffer() { return buffer_; }
  const Tensor& buffer() const { return buffer_; }
  // The bucket's parameters, and their gradients: each one's slice of buffer(), shaped like it.
  const TensorList& parameters() const { return parameters_; }
  const TensorList& gradients() const { return gradients_; }

  // A hook that averages only some of the gradients (ZeRO stage 2 averages only those of the
  // parameters this rank's optimizer shard steps: train/zero_redundancy_optimizer.h) names the
  // others, by position in gradients(), when it is called: they keep this rank's own sum, and
  // Reducer::holds_average answers false for them, so that nothing takes them for the average.
  void leave_unaveraged(size_t position) { averaged_.at(position) = false; }
  bool is_averaged(size_t position) const { return averaged_.at(position); }

private:
  size_t index_, bucket_count_;
  Tensor buffer_;
  TensorList parameters_, gradients_;
  std::vector<bool> averaged_;  // per gradient: what the hook's Work leaves there is the average
};

// A communication hook starts whatever collectives it likes on `group` for `bucket` and returns
// a Work whose wait() leaves the averaged gradients in bucket.buffer() (all of them, but those
// it named with leave_unaveraged). DDP calls it once per
// bucket per synchronised backward, in bucket order, on the thread that runs backward; every
// rank must register the same hook, since each rank must issue the same collectives.
using CommHook = std::function<WorkPtr(ProcessGroup& group, GradBucket& bucket)>;

// PyTorch's Future.then for a Work: the returned Work's wait() waits for `work`, then runs
// `continuation` once (on the first thread that waits), and rethrows the error of either on every
// wait. It is complete once the continuation has run; its timing is `work`'s.
WorkPtr then(WorkPtr work, std::function<void()> continuation);

}  // namespace sg::dist
