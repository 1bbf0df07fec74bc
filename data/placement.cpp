#include "data/placement.h"

#include "core/cuda_runtime/device_allocator.h"
#include "core/cuda_runtime/runtime.h"
#include "core/factory.h"
#include "core/kernels/pointwise.h"
#include "data/plain_copy.h"

namespace sg::data {

namespace {
// The page-locked host allocator: only a CUDA build has one, and only a machine with a GPU can use it.
Allocator& pinned_allocator() {
  if constexpr (kCudaBuild) {
    if (cuda::is_available()) return cuda::pinned_host_allocator();
  }
  SG_FAIL("pin_memory: page-locked memory needs a GPU: ", cuda::unavailable_reason());
}
}  // namespace

Tensor pinned_copy(const Tensor& t) {
  if (!t.defined()) return t;
  SG_CHECK(t.device().is_cpu(), "pin_memory: only CPU tensors can be pinned, got one on ", t.device());
  Allocator& allocator = pinned_allocator();
  if (t.numel() == 0) return t;  // nothing to transfer, so nothing to stage
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  void* block = allocator.allocate(nbytes);
  Tensor pinned = from_blob(block, t.sizes(), t.dtype(),
                            [&allocator, nbytes](void* memory) { allocator.deallocate(memory, nbytes); });
  // A plain copy, not kernels::copy: this runs on a worker thread when there are workers (Note
  // [Data code does not use the thread pool] in data/plain_copy.h).
  copy_elements(block, t);
  return pinned;
}

Tensor copied_to_device(const Tensor& t, Device device) {
  if (!t.defined() || t.device() == device) return t;
  Tensor out = empty(t.sizes(), {t.dtype(), device});
  kernels::copy(out, t);
  return out;
}

}  // namespace sg::data
