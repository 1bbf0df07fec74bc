#include "nn/checkpointing.h"

namespace sg::nn {

namespace {

// Runs modules [first, last) of `sequential` on x.
Tensor run_modules(const Sequential& sequential, size_t first, size_t last, Tensor x) {
  for (size_t i = first; i < last; ++i) x = (*sequential[i])(x);
  return x;
}

}  // namespace

Tensor checkpoint_sequential(const Sequential& sequential, int64_t segments, const Tensor& input,
                             const autograd::CheckpointOptions& options) {
  const auto size = static_cast<int64_t>(sequential.size());
  SG_CHECK(segments >= 1 && segments <= size, "checkpoint_sequential: segments must be in [1, ", size,
           "] (the Sequential's module count), got ", segments);
  const auto segment_size = static_cast<size_t>(size / segments);
  Tensor x = input;
  size_t first = 0;
  for (int64_t segment = 0; segment + 1 < segments; ++segment, first += segment_size) {
    // The bounds are copied (the recomputation runs during backward); the Sequential, a module
    // the caller keeps, is referred to.
    x = autograd::checkpoint(
        [&sequential, first, segment_size](const Tensor& segment_input) {
          return run_modules(sequential, first, first + segment_size, segment_input);
        },
        x, options);
  }
  return run_modules(sequential, first, sequential.size(), x);
}

}  // namespace sg::nn
