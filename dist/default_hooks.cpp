#include "dist/default_hooks.h"

namespace sg::dist {

namespace {

// PyTorch's _compress_hook, which casts and then divides in 16 bits. Here the division comes
// first, in the bucket's f32: one rounding instead of two, no overflow for a gradient that only
// its division brings under f16's 65504, and f32's vectorised division rather than 16-bit
// arithmetic converted element by element. Both run on this thread, before the bucket is handed
// to the communication thread; the copy back into f32 runs in the waiting thread's wait().
WorkPtr compress_hook(DType wire_dtype, ProcessGroup& group, GradBucket& bucket) {
  Tensor buffer = bucket.buffer();
  Tensor compressed = (buffer / static_cast<double>(group.size())).to(wire_dtype);
  WorkPtr sum = group.all_reduce(compressed, ReduceOp::SUM);
  return then(std::move(sum), [buffer, compressed]() mutable { buffer.copy_(compressed); });
}

}  // namespace

WorkPtr allreduce_hook(ProcessGroup& group, GradBucket& bucket) {
  return group.all_reduce(bucket.buffer(), ReduceOp::AVG);
}

WorkPtr fp16_compress_hook(ProcessGroup& group, GradBucket& bucket) { return compress_hook(DType::f16, group, bucket); }

WorkPtr bf16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(DType::bf16, group, bucket);
}

CommHook builtin_comm_hook(const std::string& name) {
  if (name == "no") return {};
  if (name == "allreduce") return allreduce_hook;
  if (name == "fp16") return fp16_compress_hook;
  if (name == "bf16") return bf16_compress_hook;
  SG_FAIL("unknown DDP communication hook \"", name,
          "\": the built-in ones are \"no\" (DDP's own average), \"allreduce\", \"fp16\" and \"bf16\"");
}

}  // namespace sg::dist
