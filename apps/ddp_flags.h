#pragma once
// defines: add_comm_hook_option, add_bucket_mb_option, add_zero_flag, add_zero_shard_gradients_flag — the
//          data-parallel options the apps and bench_models share, one wording and one check each (docs/ddp.md).
#include <CLI/CLI.hpp>

#include <string>

// --comm-hook: AcceleratorOptions::comm_hook, how DDP sends the gradients.
inline void add_comm_hook_option(CLI::App& app, std::string& comm_hook) {
  app.add_option("--comm-hook", comm_hook,
                 "Under sgrun: how DDP sends gradients: no (its f32 average), allreduce (the same, as a hook), "
                 "fp16 or bf16 (16 bits: half the bytes, rounded; docs/ddp.md)")
      ->check(CLI::IsMember({"no", "allreduce", "fp16", "bf16"}))
      ->capture_default_str();
}

// --bucket-mb: DDPOptions::bucket_cap_mb.
inline void add_bucket_mb_option(CLI::App& app, double& bucket_mb) {
  app.add_option("--bucket-mb", bucket_mb, "Under sgrun: DDP's gradient bucket size in MB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// --zero: wrap the optimizer in dist::ZeroRedundancyOptimizer.
inline CLI::Option* add_zero_flag(CLI::App& app, bool& zero) {
  return app.add_flag("--zero", zero,
                      "Under sgrun: ZeRO-1, each process keeps the optimizer state of its shard of the parameters "
                      "only (docs/ddp.md)");
}

// --zero-shard-gradients: AcceleratorOptions::zero_shard_gradients (ZeRO-2's gradients); only with --zero.
inline void add_zero_shard_gradients_flag(CLI::App& app, bool& shard_gradients, CLI::Option* zero_flag) {
  app.add_flag("--zero-shard-gradients", shard_gradients,
               "With --zero: ZeRO-2's gradients, DDP's buckets reduce-scattered so that each process receives the "
               "average of its shard's gradients only (docs/ddp.md)")
      ->needs(zero_flag);
}
