#include "core/allocator.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace sg {

namespace {
class CpuAllocator final : public Allocator {
public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    // aligned_alloc requires the size to be a multiple of the alignment.
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* ptr = std::aligned_alloc(kCpuAlignment, rounded);
    SG_CHECK(ptr != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return ptr;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator& allocator_for(const Device& device) {
  check_device_supported(device, "allocate");
  return cpu_allocator();
}

}  // namespace sg
