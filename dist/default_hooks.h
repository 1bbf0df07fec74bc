#pragma once
// defines: dist::allreduce_hook, fp16_compress_hook, bf16_compress_hook, builtin_comm_hook —
//          the communication hooks PyTorch ships in ddp_comm_hooks/default_hooks.py, for
//          DistributedDataParallel::register_comm_hook (dist/comm_hook.h, docs/ddp.md).
#include <string>

#include "dist/comm_hook.h"

namespace sg::dist {

// The average, as DDP computes it without a hook: one all-reduce of the bucket with AVG. The
// shape to start from when writing a hook.
WorkPtr allreduce_hook(ProcessGroup& group, GradBucket& bucket);

// Gradient compression: the bucket travels as f16 (or bf16), half the bytes of f32. Each rank
// divides its gradients by the number of ranks (before the sum, so that the sum of many ranks
// stays in range), casts them, all-reduces the 16-bit values with SUM, and wait() copies the
// result back into the f32 bucket. Each gradient carries the rounding of one cast and of each
// addition in 16 bits: f16 keeps 11 significant bits (relative error about
// 5e-4 per rounding) with a range of +-65504, values under 6e-5 losing precision and under 6e-8
// becoming 0; bf16 keeps 8 bits (about 4e-3) with f32's range.
WorkPtr fp16_compress_hook(ProcessGroup& group, GradBucket& bucket);
WorkPtr bf16_compress_hook(ProcessGroup& group, GradBucket& bucket);

// The hook a setting names: "allreduce", "fp16" or "bf16"; "no" gives an empty CommHook (DDP's
// own average, no hook). Any other name is an error listing these.
CommHook builtin_comm_hook(const std::string& name);

}  // namespace sg::dist
