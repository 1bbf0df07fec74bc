#pragma once
// defines: add_comm_hook_option, add_bucket_mb_option, add_zero_flag — the data-parallel options the
//          apps and bench_models share, one wording and one check each (docs/ddp.md).
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
inline void add_zero_flag(CLI::App& app, bool& zero) {
  app.add_flag("--zero", zero,
               "Under sgrun: ZeRO-1, each process keeps the optimizer state of its shard of the parameters only "
               "(docs/ddp.md)");
}
