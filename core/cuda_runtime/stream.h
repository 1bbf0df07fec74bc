#pragma once
// defines: cuda::compute_stream, cuda::DeviceGuard — where GPU work runs.
//
// Note [One compute stream]
// Every kernel, cuBLAS/cuDNN call and host<->device copy of syncgrad runs on the legacy default
// stream of the current device. Work on one stream runs in issue order, so a block the caching
// allocator hands out again after a tensor died is never overwritten while an earlier kernel
// still reads it, and a device-to-host copy sees every kernel before it. The one exception is
// the NCCL process group (dist/cuda/process_group_nccl.cpp): its collectives run on a stream of
// their own that first waits for an event recorded on this stream, and a Work keeps its
// tensors alive until the compute stream has waited for the collective's end.
#include <cuda_runtime_api.h>

namespace sg::cuda {

inline cudaStream_t compute_stream() { return nullptr; }  // the legacy default stream

// Makes `index` the current device for its lifetime (kernels and allocations go there), then
// restores the previous one.
//
// Note [Freeing after the CUDA runtime has gone]
// Objects that outlive main — a process group left to the static destructors after an exception,
// tensors held by statics — are destroyed after the CUDA runtime has begun to unload, and every
// runtime call then fails with cudaErrorCudartUnloading. There is nothing left to switch or free
// (the driver reclaims the process's memory), and a throw from a destructor would end the process
// with std::terminate, so the guard does nothing then and the allocator ignores that error of
// cudaFree.
class DeviceGuard {
public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace sg::cuda
