#include "train/run_settings.h"

#include <string>

#include "train/accelerator.h"

namespace sg::dist {

RunFingerprint accelerator_settings(const AcceleratorOptions& options) {
  RunFingerprint settings;
  settings.add("accelerator.mixed_precision", options.mixed_precision);
  settings.add("accelerator.comm_hook", options.comm_hook);  // ranks that differ issue different collectives
  settings.add("accelerator.zero_shard_gradients", options.zero_shard_gradients);
  settings.add("accelerator.gradient_accumulation_steps", options.gradient_accumulation_steps);
  settings.add("accelerator.split_batches", options.split_batches);
  settings.add("accelerator.even_batches", options.even_batches);
  settings.add("accelerator.sync_batchnorm", options.sync_batchnorm);
  return settings;
}

RunFingerprint optimizer_settings(const optim::Optimizer& optimizer) {
  RunFingerprint settings;
  settings.add("optimizer.type", optimizer.type_name());
  const size_t groups = optimizer.num_param_groups();
  if (groups > 1) settings.add("optimizer.param_groups", groups);
  for (size_t group = 0; group < groups; ++group) {
    const std::string prefix = groups == 1 ? "optimizer." : "optimizer.param_groups[" + std::to_string(group) + "].";
    for (const auto& [name, value] : optimizer.hyperparameters(group)) settings.add(prefix + name, value);
  }
  return settings;
}

RunFingerprint loader_settings(size_t index, const data::DataLoaderOptions& options,
                               const data::DistributedBatchSampler& batches) {
  const std::string prefix = "loaders[" + std::to_string(index) + "].";
  RunFingerprint settings;
  settings.add(prefix + "dataset_size", batches.sampler().dataset_size());
  settings.add(prefix + "batch_size", batches.batch_size());
  settings.add(prefix + "batches", batches.size());
  settings.add(prefix + "shuffle", options.shuffle);
  settings.add(prefix + "drop_last", options.drop_last);
  if (options.shuffle) settings.add(prefix + "seed", options.seed);  // unused for the order otherwise
  return settings;
}

}  // namespace sg::dist
