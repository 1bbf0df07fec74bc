#pragma once
// defines: nn::BatchNorm1d, nn::BatchNorm2d — batch normalisation with running statistics, as
//          torch.nn.BatchNorm*d (the op itself: autograd/ops_norm.h).
#include <functional>
#include <optional>

#include "nn/module.h"

namespace sg::nn {

// What BatchNorm1d and BatchNorm2d share (PyTorch's _BatchNorm); they differ in the input ranks
// they accept.
//
// Parameters: weight (ones) and bias (zeros), [num_features], when affine.
// Buffers (when track_running_stats): running_mean (zeros), running_var (ones), both
// [num_features], and num_batches_tracked (i64 0-dim, counts training forwards).
// Training normalises with the batch's statistics and moves the running ones towards them:
// running = (1 - momentum) * running + momentum * batch (the unbiased batch variance), where a
// momentum of nullopt means the cumulative average (momentum = 1 / num_batches_tracked).
// Eval normalises with the running statistics, or with the batch's when they are not tracked.
//
// Note [BatchNorm under activation checkpointing]
// A checkpointed segment (autograd/checkpoint.h) runs its forward twice: once in the forward pass
// and once more in backward. Both runs must normalise with the same batch statistics, or the
// gradients would belong to another forward; but only the first may move the running statistics
// and num_batches_tracked, or every checkpointed step would count twice (PyTorch's checkpoint
// leaves this to the user). So a training forward during the recomputation
// (autograd::is_checkpoint_recomputation()) normalises with the batch's statistics as usual and
// updates nothing: running statistics after a checkpointed step equal those of a plain one.
class BatchNormBase : public Module {
public:
  Tensor forward(const Tensor& input) override;
  // Whether a forward now moves the running statistics: in training, when they are tracked, and
  // not while a checkpointed segment is recomputed (Note [BatchNorm under activation checkpointing]).
  bool updates_running_stats() const;
  std::string extra_repr() const override;
  void reset_running_stats();
  void reset_parameters();  // also resets the running statistics

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;                                    // undefined unless affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined unless track_running_stats
  // When set, forwards that normalise with batch statistics call it instead of batch_norm,
  // with the momentum to apply (to the running statistics only when updates_running_stats()).
  // dist::convert_sync_batchnorm installs one whose statistics span every rank (SyncBatchNorm); nn itself knows nothing
  // of processes (dist is a later layer).
  std::function<Tensor(const Tensor& input, double momentum)> batch_statistics_forward;

protected:
  BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                bool track_running_stats);
  // Throws unless input has a rank this layer accepts and num_features channels in dim 1.
  virtual void check_input(const Tensor& input) const = 0;
  void check_channels(const Tensor& input) const;
};

// Input [N, C] or [N, C, L]; statistics per C over N (and L).
class BatchNorm1d : public BatchNormBase {
public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}
  std::string type_name() const override { return "BatchNorm1d"; }

protected:
  void check_input(const Tensor& input) const override;
};

// Input [N, C, H, W]; statistics per C over N, H and W.
class BatchNorm2d : public BatchNormBase {
public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}
  std::string type_name() const override { return "BatchNorm2d"; }

protected:
  void check_input(const Tensor& input) const override;
};

}  // namespace sg::nn
