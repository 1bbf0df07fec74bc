#include "core/cuda/device_allocator.h"

#include <array>
#include <memory>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/error.h"

namespace sg::cuda {

namespace {

constexpr int kMaxDevices = 64;

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
        cache_({.allocate = [index](size_t size) { DeviceGuard guard(index); return malloc_on_device(size); },
                .release = [index](void* block) { DeviceGuard guard(index); SG_CUDA_CHECK(cudaFree(block)); }},
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

// Created on first use and never destroyed: tensors may die during static destruction, after
// the CUDA runtime has been torn down, and freeing into a dead allocator would crash.
DeviceAllocator& allocator_of(int index) {
  static std::array<DeviceAllocator*, kMaxDevices> allocators{};
  static std::mutex mutex;
  SG_CHECK(index >= 0 && index < device_count() && index < kMaxDevices, "cuda: no device cuda:", index,
           " (this machine has ", device_count(), " GPU(s))");
  std::lock_guard lock(mutex);
  if (allocators[index] == nullptr) allocators[index] = new DeviceAllocator(index);
  return *allocators[index];
}

}  // namespace

Allocator& device_allocator(int index) { return allocator_of(index); }
BlockCache& device_block_cache(int index) { return allocator_of(index).cache(); }

Allocator& pinned_host_allocator() {
  static PinnedHostAllocator* allocator = new PinnedHostAllocator;
  return *allocator;
}

}  // namespace sg::cuda
