#pragma once
// defines: dist::Reducer, Bucket, ReducerObserver, assign_buckets —
//          DDP's gradient machinery: buckets whose slices are the parameters' .grad, the
//          "gradient ready" hooks, the asynchronous all-reduces (or communication hooks) that
//          overlap backward, and the wait for them at the end of backward. docs/ddp.md tells the story.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/comm_hook.h"
#include "dist/process_group.h"

namespace sg::dist {

// The profiler's name for the training thread's wait, at the end of a synchronised backward, for
// the all-reduces still running: the communication that backward did not hide.
inline constexpr const char* kWaitForAllReduces = "DDP: waiting for the all-reduces";

// A contiguous run of gradients all-reduced as one tensor: fewer, larger collectives cost
// less than one per parameter, and the first buckets can be sent while backward still
// computes the gradients of earlier layers.
struct Bucket {
  std::vector<size_t> params;  // indices into the reducer's parameters, in bucket order
  Tensor buffer;               // flat, one dtype, all-reduced in place
  TensorList views;            // per parameter: its slice of `buffer`, shaped like it, which becomes its .grad
  size_t pending = 0;          // gradients not yet in the bucket during this backward
  WorkPtr work;                // the all-reduce (or the communication hook's Work) in flight, once launched
};

// Bucket assignment, PyTorch's rule: walk the parameters in registration order, each dtype
// filling its own open bucket, and close a bucket once it holds at least its limit: 1 MiB (or
// `cap_bytes` if smaller) for the first bucket of each dtype, `cap_bytes` for the rest. The
// buckets are returned last-registered first, roughly the order backward fills them. The small
// first bucket holds the earliest layers, whose gradients backward produces last, so at most
// about 1 MiB is left to send when backward ends. Returns each bucket's parameter indices.
std::vector<std::vector<size_t>> assign_buckets(const TensorList& params, size_t cap_bytes);

// What a Reducer announces as a synchronised backward unfolds, in this order and on the thread
// that runs backward. Instrumentation listens here (dist/backward_timeline.h: step timings and
// the Chrome trace), so the reducer itself holds none of it. Every event does nothing by default.
class ReducerObserver {
public:
  virtual ~ReducerObserver() = default;
  virtual void backward_started() {}    // the gradient reached the model's output
  virtual void bucket_ready(size_t) {}  // the bucket's last gradient is in; its all-reduce may start
  virtual void backward_finished() {}   // backward's last node ran; the wait for the all-reduces begins
  virtual void gradients_averaged(const std::vector<Bucket>&) {}  // every all-reduce completed
};

class Reducer : public std::enable_shared_from_this<Reducer> {
public:
  // `params` are the parameters that require grad, in registration order; `names` label them in
  // errors. A parameter that already has a .grad gets it copied into its bucket and pointed
  // there. Call install_hooks() once the reducer is owned by a shared_ptr.
  Reducer(TensorList params, std::vector<std::string> names, ProcessGroup& group, size_t bucket_cap_bytes,
          bool find_unused_parameters);
  // Gives the parameters back their plain gradients: no bucket to land in, no partial mark.
  ~Reducer();
  // The post-accumulate hooks that mark each gradient ready, and each parameter's bucket slot as
  // the home its gradient is written into (Note [A gradient written where it lands] in
  // autograd/engine.cpp).
  void install_hooks();
  void set_observer(std::shared_ptr<ReducerObserver> observer);
  // Note [Communication hooks] in dist/reducer.cpp: from the next synchronised backward on, each
  // bucket goes through `hook` instead of an all-reduce with AVG. Once only, before the first
  // synchronised backward (DistributedDataParallel::register_comm_hook).
  void register_comm_hook(CommHook hook);

  // Called by DDP's forward before every backward that should synchronise: forgets the state
  // of the previous backward. With `sync` false (no_sync), hooks leave gradients local.
  void prepare_for_backward(bool sync);
  // Called when the gradient reaches the model's output (the observer's backward_started).
  void mark_backward_start();
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Whether `grad` lies in a bucket and the last backward was synchronised, so that it holds
  // the average over every rank (unless someone changed it since on this rank alone). False for
  // a gradient the communication hook left unaveraged (GradBucket::leave_unaveraged).
  bool holds_average(const Tensor& grad) const;
  // How many synchronised backwards have finished: the same count on every rank, since each one
  // all-reduces with all of them (DDP's replica check counts its steps by it).
  int64_t synchronised_backwards() const { return synchronised_backwards_; }

  // Note [Finding the rank an overflow came from]
  // Averaging carries one rank's inf or NaN into every rank's gradient, which then cannot tell
  // where it began. With this switched on, each bucket is checked on its way out, before its
  // all-reduce: the parameters whose local gradient held inf/NaN are remembered until the next
  // backward. One pass over each bucket, and one per parameter of a bucket that holds any;
  // the loss scaler's diagnostics ask (dist::Accelerator with amp_diagnostics). Parameters that
  // got no gradient in a backward under find_unused_parameters are not checked.
  void set_check_nonfinite_before_average(bool on) { check_nonfinite_before_average_ = on; }
  // Of the last synchronised backward, with the check on: whether `param`'s gradient held inf or
  // NaN on this rank before the average. Several ranks may say yes: each is a rank of origin.
  bool was_nonfinite_before_average(const Tensor& param) const;

private:
  void mark_ready(size_t param);
  void point_grad_at_bucket(size_t param);
  void slot_filled(size_t bucket);
  void check_nonfinite(const Bucket& bucket);
  void launch_ready_buckets();
  WorkPtr run_comm_hook(size_t bucket);
  void finalize();  // queued at the end of backward
  void finish_with_every_parameter_used(const std::vector<size_t>& unused);
  void finish_with_unused_parameters(const std::vector<size_t>& unused);

  TensorList params_;
  std::vector<std::string> names_;
  ProcessGroup& group_;
  bool find_unused_parameters_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;       // per parameter: its bucket
  std::vector<size_t> slot_of_;         // per parameter: its position within the bucket
  std::vector<bool> ready_;             // per parameter, this backward
  std::vector<bool> averaged_by_hook_;  // per parameter: not left unaveraged by the hook, last backward
  size_t next_bucket_to_launch_ = 0;
  bool sync_ = true;
  bool expecting_backward_ = false;  // set by prepare_for_backward, cleared by finalize
  bool finalize_queued_ = false;
  bool averaged_ = false;  // the buckets hold the average of the last synchronised backward
  int64_t synchronised_backwards_ = 0;
  bool check_nonfinite_before_average_ = false;
  std::vector<size_t> nonfinite_before_average_;  // parameters, this backward, with the check on
  std::shared_ptr<ReducerObserver> observer_ = std::make_shared<ReducerObserver>();
  CommHook comm_hook_;  // empty: each bucket is all-reduced with AVG
};

}  // namespace sg::dist
