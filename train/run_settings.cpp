#include "train/run_settings.h"

#include <string>
#include <vector>

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

RunFingerprint scheduler_settings(const optim::LRScheduler& scheduler) {
  std::vector<int64_t> steps = {0};  // then 1, 2, 5, 10, 20, 50, ... 10^6
  for (int64_t decade = 1; decade <= 1'000'000; decade *= 10)
    for (int64_t multiple : {1, 2, 5})
      if (multiple * decade <= 1'000'000) steps.push_back(multiple * decade);
  RunFingerprint settings;
  const size_t groups = scheduler.base_lrs().size();
  for (size_t group = 0; group < groups; ++group) {
    const std::string prefix = groups == 1 ? "scheduler." : "scheduler.param_groups[" + std::to_string(group) + "].";
    for (int64_t step : steps) {
      const std::string name = prefix + "lr_at_step_" + std::to_string(step);
      try {
        settings.add(name, scheduler.lr_at(step, group));
      } catch (const std::exception& error) {  // a LambdaLR factor that refuses steps past its run
        settings.add(name, std::string("throws: ") + error.what());
      }
    }
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
