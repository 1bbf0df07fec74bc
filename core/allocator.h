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
// Caches large blocks for reuse (Note [CPU block cache] in core/allocator.cpp).
Allocator& cpu_allocator();

// What the CPU block cache holds, and a way to give it back to the system.
struct CpuCacheStats {
  size_t cached_bytes = 0;  // freed blocks kept for reuse
  size_t hits = 0;          // allocations served from the cache
  size_t misses = 0;        // cacheable allocations that went to the system
};
CpuCacheStats cpu_cache_stats();
void cpu_empty_cache();
Allocator& allocator_for(const Device& device);

inline constexpr size_t kCpuAlignment = 64;

}  // namespace sg
