#include "core/cuda_runtime/device_allocator.h"

#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/per_device.h"
#include "core/error.h"

namespace sg::cuda {

namespace {

// cudaMalloc on the current device; nullptr when the device is out of memory (the cache then
// frees what it holds and retries), an sg::Error for any other failure.
void* malloc_on_device(size_t size) {
  void* block = nullptr;
  const cudaError_t status = cudaMalloc(&block, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  SG_CUDA_CHECK(status);
  return block;
}

class DeviceAllocator : public Allocator {
public:
  explicit DeviceAllocator(int index)
      : index_(index),
        cache_({.allocate =
                    [index](size_t size) {
                      DeviceGuard guard(index);
                      return malloc_on_device(size);
                    },
                .release =
                    [index](void* block) {
                      DeviceGuard guard(index);
                      const cudaError_t status = cudaFree(block);
                      // Note [Freeing after the CUDA runtime has gone] (core/cuda_runtime/stream.h)
                      if (status != cudaErrorCudartUnloading) SG_CUDA_CHECK(status);
                    }},
               Device::cuda(index).str()) {}

  void* allocate(size_t nbytes) override { return cache_.allocate(nbytes); }
  void deallocate(void* ptr, size_t nbytes) override { cache_.deallocate(ptr, nbytes); }
  Device device() const override { return Device::cuda(index_); }
  BlockCache& cache() { return cache_; }

private:
  int index_;
  BlockCache cache_;
};

class PinnedHostAllocator : public Allocator {
public:
  PinnedHostAllocator()
      : cache_({.allocate = [](size_t size) -> void* {
                  void* block = nullptr;
                  const cudaError_t status = cudaHostAlloc(&block, size, cudaHostAllocDefault);
                  if (status == cudaErrorMemoryAllocation) {
                    cudaGetLastError();
                    return nullptr;
                  }
                  SG_CUDA_CHECK(status);
                  return block;
                },
                .release = [](void* block) { SG_CUDA_CHECK(cudaFreeHost(block)); }},
               "pinned host memory") {}

  void* allocate(size_t nbytes) override { return cache_.allocate(nbytes); }
  void deallocate(void* ptr, size_t nbytes) override { cache_.deallocate(ptr, nbytes); }
  Device device() const override { return Device::cpu(); }

private:
  BlockCache cache_;
};

DeviceAllocator& allocator_of(int index) {
  static auto* allocators = new PerDevice<DeviceAllocator>("cuda");  // Note in core/cuda_runtime/per_device.h
  return allocators->get(index, [index] { return new DeviceAllocator(index); });
}

}  // namespace

Allocator& device_allocator(int index) { return allocator_of(index); }
BlockCache& device_block_cache(int index) { return allocator_of(index).cache(); }

Allocator& pinned_host_allocator() {
  static PinnedHostAllocator* allocator = new PinnedHostAllocator;
  return *allocator;
}

}  // namespace sg::cuda
