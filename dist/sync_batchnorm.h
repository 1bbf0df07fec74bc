#pragma once
// defines: sync_batch_norm, convert_sync_batchnorm — batch normalisation whose statistics span
//          every rank, as torch.nn.SyncBatchNorm: with a per-rank batch of b on W ranks, it
//          normalises exactly as BatchNorm would over the whole batch of W*b.
#include "dist/process_group.h"
#include "nn/module.h"

namespace sg::dist {

// Training-mode batch norm over the union of every rank's batch. Forward: each rank computes
// its per-channel count, mean and sum of squared deviations (in f64), all ranks gather them and
// combine them in rank order (Chan's parallel-variance formula, stable and identical on every
// rank), then normalise locally and move the running statistics. Backward: the per-channel
// sums of dy and dy*xhat are all-reduced, because the gradient of every input depends on the
// whole batch's statistics; grad_weight and grad_bias stay local (DDP averages them).
Tensor sync_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, double momentum, double eps, ProcessGroup& group);

// Switches every BatchNorm1d/2d inside `module` to synchronised statistics in training. Eval
// forwards stay local: no communication and no process group needed (the running statistics,
// or without them this rank's batch, as in PyTorch). The modules are changed in place rather
// than replaced because C++ parents hold typed handles to their children (docs/decisions.md).
// `group` defaults to the default process group at forward time; with one rank, or no group,
// it is plain BatchNorm. Returns how many layers were converted.
int convert_sync_batchnorm(nn::Module& module, ProcessGroup* group = nullptr);

}  // namespace sg::dist
