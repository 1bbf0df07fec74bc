#pragma once
// defines: dist::Reducer — DDP's gradient machinery: buckets, the "gradient ready" hooks, the
//          asynchronous all-reduces that overlap backward, and the end-of-backward step that
//          writes the averaged gradients back into .grad. docs/ddp.md tells the story.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"

namespace sg::dist {

class ChromeTrace;

// A contiguous run of gradients all-reduced as one tensor: fewer, larger collectives cost
// less than one per parameter, and the first buckets can be sent while backward still
// computes the gradients of earlier layers.
struct Bucket {
  std::vector<size_t> params;                      // indices into the reducer's parameters, in bucket order
  std::vector<int64_t> offsets;                    // where each parameter's gradient starts in `buffer`
  Tensor buffer;                                   // flat, one dtype, all-reduced in place
  size_t pending = 0;                              // gradients not yet copied in during this backward
  WorkPtr work;                                    // the all-reduce in flight, once launched
  std::chrono::steady_clock::time_point ready_at;  // when its last gradient arrived (trace)
};

// Bucket assignment: walk the parameters in REVERSE registration order (roughly the order
// backward produces their gradients), start a new bucket when the dtype changes or the next
// gradient would push the bucket past `cap_bytes`. A parameter larger than the cap gets a
// bucket of its own. Returns each bucket's parameter indices.
std::vector<std::vector<size_t>> assign_buckets(const TensorList& params, size_t cap_bytes);

class Reducer : public std::enable_shared_from_this<Reducer> {
public:
  // `params` are the parameters that require grad, in registration order; `names` label them in
  // errors. Call install_hooks() once the reducer is owned by a shared_ptr.
  Reducer(TensorList params, std::vector<std::string> names, ProcessGroup& group, size_t bucket_cap_bytes,
          bool find_unused_parameters);
  void install_hooks();

  // Called by DDP's forward before every backward that should synchronise: forgets the state
  // of the previous backward. With `sync` false (no_sync), hooks leave gradients local.
  void prepare_for_backward(bool sync);
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Timings of the last synchronised backward (bench/ reports them against the backward time).
  struct StepTimes {
    double backward_ms = 0;    // from the gradient reaching the model's output to backward's last node
    double wait_ms = 0;        // from backward's last node to the averaged gradients in .grad
    double all_reduce_ms = 0;  // the buckets' all-reduces as they ran on the communication thread
  };
  const StepTimes& last_step_times() const { return last_step_times_; }
  // Records the first `steps` synchronised backwards (backward, waiting, each bucket's
  // all-reduce) and then writes them, all ranks in one file, to `path` (rank 0 writes).
  void trace_to(const std::string& path, int steps);
  // Called when the gradient reaches the model's output: where the trace's backward begins.
  void mark_backward_start();

private:
  void mark_ready(size_t param);
  void launch_ready_buckets();
  void finalize();  // queued at the end of backward
  void record_trace(std::chrono::steady_clock::time_point backward_done);

  TensorList params_;
  std::vector<std::string> names_;
  ProcessGroup& group_;
  bool find_unused_parameters_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter: its bucket
  std::vector<size_t> slot_of_;    // per parameter: its position within the bucket
  std::vector<bool> ready_;        // per parameter, this backward
  size_t next_bucket_to_launch_ = 0;
  bool sync_ = true;
  bool expecting_backward_ = false;  // set by prepare_for_backward, cleared by finalize
  bool finalize_queued_ = false;
  StepTimes last_step_times_;
  std::shared_ptr<ChromeTrace> trace_;
  std::string trace_path_;
  int trace_steps_left_ = 0;
  std::chrono::steady_clock::time_point backward_started_;
};

}  // namespace sg::dist
