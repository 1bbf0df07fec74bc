#pragma once
// defines: Allocator, cpu_allocator — raw memory for Storage.
#include <cstddef>

#include "core/device.h"

namespace sg {

// An allocator hands out raw bytes for one device. The CUDA caching allocator will be a
// second implementation of this interface; Storage never knows which one it holds.
class Allocator {
public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual Device device() const = 0;
};

// 64-byte aligned (a cache line and an AVX-512 vector), so every kernel may use aligned loads.
Allocator& cpu_allocator();
Allocator& allocator_for(const Device& device);

inline constexpr size_t kCpuAlignment = 64;

}  // namespace sg
