#pragma once
// defines: dist::DistributedDataParallel (DDP), DDPOptions — data-parallel training: every rank
//          holds a replica of the model, trains on its own shard of each batch, and the
//          gradients are averaged across ranks during backward, so all replicas take the same
//          optimizer step. The gradient machinery lives in dist/reducer.h; docs/ddp.md explains it.
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dist/backward_timeline.h"
#include "dist/comm_hook.h"
#include "dist/exchange.h"
#include "dist/process_group.h"
#include "dist/reducer.h"
#include "nn/module.h"

namespace sg::dist {

struct DDPOptions {
  double bucket_cap_mb = 25;            // gradients are all-reduced in buckets of about this size
  bool find_unused_parameters = false;  // allow parameters that get no gradient in some steps
  bool broadcast_buffers = true;        // rank 0's buffers (BatchNorm statistics) after each training forward
  std::string trace_path = {};          // when set, a Chrome trace of the first trace_steps backwards
  int trace_steps = 3;
  // Every this many synchronised steps, compare a hash of each parameter and buffer across the
  // ranks, and stop all of them with an error naming the first tensor whose replicas differ;
  // 0: never (Note [Replicas stay identical] in dist/replica_check.h).
  int check_replicas_every = 0;
  // Before each bucket's all-reduce, remember which of this rank's gradients held inf/NaN
  // (reducer().was_nonfinite_before_average): after the average every rank holds them. For
  // debugging f16 overflows; Note [Finding the rank an overflow came from] in dist/reducer.h.
  bool find_nonfinite_origin = false;
};

// Usage (one process per rank, after dist::init_process_group):
//
//   auto model = std::make_shared<dist::DistributedDataParallel>(models::CNN());
//   Tensor loss = cross_entropy((*model)(images), labels);
//   loss.backward();   // .grad now holds the average over all ranks (a view into a bucket)
//   optimizer.step();
//
// A model whose forward has another signature (several inputs, several outputs) runs through
// call(), which does around any forward what operator() does around the one-tensor one:
//
//   auto gpt = std::make_shared<models::GPT>(config);
//   dist::DistributedDataParallel ddp(gpt);
//   auto [logits, loss] = ddp.call([&] { return gpt->forward(idx, targets); });
//
// Construction checks that every rank has the same parameter names, shapes and dtypes and the
// same DDPOptions, trace files aside (Note [Ranks agree on the run's settings] in
// dist/run_fingerprint.h), and copies rank 0's parameters and buffers to every rank. That they
// stay equal is checked only with check_replicas_every or check_replicas(). The wrapped
// model is the child "module", so parameter names read "module.fc.weight" as in PyTorch; save
// `module()`'s state_dict to get the plain names.
class DistributedDataParallel : public nn::Module {
public:
  // `group` defaults to the default process group (dist::init_process_group).
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {},
                                   ProcessGroup* group = nullptr);

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "DistributedDataParallel"; }

  // Runs `forward`, a callable that runs the wrapped module's forward and returns a Tensor, a
  // TensorList, or a std::pair / std::tuple of Tensors, with DDP's work around it (the gradient
  // all-reduce of the backward that follows, rank 0's buffers). It must use the wrapped module,
  // and every rank must call it the same number of times per step.
  template <typename Forward>
  auto call(Forward&& forward) {
    begin_forward();
    auto outputs = std::forward<Forward>(forward)();
    end_forward(tensors_of(outputs));
    return outputs;
  }

  // Replaces the all-reduce of each gradient bucket with `hook` (PyTorch's register_comm_hook;
  // built-in hooks in dist/default_hooks.h: fp16_compress_hook sends half the bytes). Call it
  // once, on every rank with the same hook, before the first synchronised backward; an sg::Error
  // otherwise. Note [Communication hooks] in dist/reducer.cpp, docs/ddp.md.
  void register_comm_hook(CommHook hook) { reducer_->register_comm_hook(std::move(hook)); }

  nn::Module& module() const { return *module_; }
  const Reducer& reducer() const { return *reducer_; }
  // Timings of the last synchronised backward (bench/ reports them against the backward time).
  const StepTimes& last_step_times() const { return timeline_->last_step_times(); }
  ProcessGroup& process_group() const { return group_; }
  const DDPOptions& options() const { return options_; }

  // Compares every parameter, every buffer and the `optimizer_state` tensors (named as the error
  // should show them: optim::Optimizer::named_state) across the ranks now, and throws on every
  // rank, naming the first tensor that differs, when the replicas do not agree (Note [Replicas
  // stay identical] in dist/replica_check.h). A collective: every rank calls it at the same point,
  // e.g. before a snapshot is saved.
  void check_replicas(const nn::NamedTensors& optimizer_state = {});

  // While a NoSync is alive, forwards through this DDP prepare backwards that keep gradients
  // local (they accumulate in .grad); the first backward after it ends averages the sum.
  // Gradient accumulation over k micro-batches: k-1 steps under no_sync(), then one without.
  class NoSync {
  public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

  private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

private:
  void begin_forward();
  void check_replicas_if_due();
  void compare_replicas(const nn::NamedTensors& optimizer_state, const std::string& where);
  void end_forward(const TensorList& outputs);
  static TensorList tensors_of(const Tensor& output) { return {output}; }
  static TensorList tensors_of(const TensorList& outputs) { return outputs; }
  template <typename... Ts>
  static TensorList tensors_of(const std::tuple<Ts...>& outputs) {
    return std::apply([](const auto&... output) { return TensorList{output...}; }, outputs);
  }
  template <typename A, typename B>
  static TensorList tensors_of(const std::pair<A, B>& outputs) {
    return {outputs.first, outputs.second};
  }

  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  DDPOptions options_;
  std::shared_ptr<Reducer> reducer_;
  std::shared_ptr<BackwardTimeline> timeline_;  // the reducer's observer: step times, the trace
  CoalescedBroadcast buffer_broadcast_;         // rank 0's buffers, sent after each training forward
  bool sync_gradients_ = true;
  nn::NamedTensors trainable_;     // the reducer's parameters, in its order, with the names DDP gives them
  int64_t last_checked_step_ = 0;  // check_replicas_every: the step of the last check (0: construction)
};

}  // namespace sg::dist
