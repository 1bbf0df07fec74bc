#pragma once
// defines: pinned_copy, copied_to_device — where a DataLoader puts its batches' memory
//          (DataLoaderOptions::pin_memory and ::device).
//
// Note [Pinned staging and device placement]
// A copy from ordinary (pageable) host memory to a GPU goes through a driver-owned page-locked
// buffer, chunk by chunk, on the calling thread. With pin_memory the loader copies each batch into
// page-locked memory itself (cuda::pinned_host_allocator) where the batch is made — on a worker
// thread when there are workers, so that memcpy leaves the training thread — and the transfer
// from there runs at full bus speed. The move to the GPU happens on the consuming thread, when
// the batch is handed out: the copy then enters the compute stream in program order, after the
// previous step's kernels (Note [One compute stream] in core/cuda_runtime/stream.h). data/ depends on
// core/ only (docs/decisions.md, "The layers depend one way"), so both copies are core-level: a plain memcpy into the
// pinned block and kernels::copy into an empty tensor on the device — never Tensor::to.
#include "core/tensor.h"

namespace sg::data {

// `t` (a CPU tensor) copied, contiguous, into page-locked host memory; still a CPU tensor. `t`
// itself when it is undefined or empty. Needs a usable GPU (cuda::is_available()): page-locked
// memory is the CUDA driver's.
Tensor pinned_copy(const Tensor& t);

// `t` itself when it is undefined or already on `device`, else a contiguous copy there.
Tensor copied_to_device(const Tensor& t, Device device);

}  // namespace sg::data
