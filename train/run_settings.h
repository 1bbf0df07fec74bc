#pragma once
// defines: dist::accelerator_settings, optimizer_settings, scheduler_settings, loader_settings —
//          what the Accelerator compares across ranks when it joins the group and at
//          prepare(optimizer), prepare(scheduler) and prepare(dataset, options) (Note [Ranks
//          agree on the run's settings] in dist/run_fingerprint.h).
#include <cstddef>

#include "data/dataloader.h"
#include "data/distributed_batch_sampler.h"
#include "dist/run_fingerprint.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace sg::dist {

struct AcceleratorOptions;

// mixed_precision, comm_hook, gradient_accumulation_steps, split_batches, even_batches, sync_batchnorm as
// "accelerator.<option>". Its DDPOptions are DDP's own to compare; its device may differ (one GPU per rank).
RunFingerprint accelerator_settings(const AcceleratorOptions& options);

// "optimizer.type" ("Adam") and every hyper-parameter of its one group ("optimizer.lr",
// "optimizer.beta1", ...); with several groups, "optimizer.param_groups" (their number) and
// "optimizer.param_groups[g].lr" for each group g. Booleans (amsgrad, nesterov) read 0 or 1.
RunFingerprint optimizer_settings(const optim::Optimizer& optimizer);

// A schedule is a function, not a list of settings, so it is compared by its values: every param
// group's lr at steps 0, 1, 2, 5, 10, 20, 50, ... up to 10^6 as "scheduler.lr_at_step_<k>" (with
// several groups, "scheduler.param_groups[g].lr_at_step_<k>"). Schedules that differ in a warm-up
// length, a total step count, a step size or a floor differ at one of those steps. A LambdaLR
// factor is called at those steps too, so it must accept any step >= 0 (one that throws there is
// compared by its message).
RunFingerprint scheduler_settings(const optim::LRScheduler& scheduler);

// The `index`-th prepared loader as "loaders[<index>].<field>": dataset_size, batch_size (this
// rank's), batches (per pass), shuffle, drop_last and, when it shuffles, seed.
RunFingerprint loader_settings(size_t index, const data::DataLoaderOptions& options,
                               const data::DistributedBatchSampler& batches);

}  // namespace sg::dist
