#pragma once
// defines: DeviceType, Device — where a tensor's memory lives.
#include <ostream>
#include <string>

namespace sg {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // which GPU; always 0 for the CPU

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:1"
};

std::ostream& operator<<(std::ostream& out, const Device& device);

// True when this library was built with the CUDA backend (CMake's SG_CUDA found nvcc). The
// kernel dispatch points guard their calls into sg::cuda with `if constexpr (kCudaBuild)`, so a
// CPU-only build neither compiles nor links any CUDA code.
#ifndef SG_WITH_CUDA
#define SG_WITH_CUDA 0
#endif
inline constexpr bool kCudaBuild = SG_WITH_CUDA;

// Note [Kernel dispatch]
// Every kernel entry point (core/kernels/*.cpp) starts with this call, so a tensor on a device
// the op cannot serve fails with a message, never with a GPU pointer handed to CPU code:
//   if (runs_on_cuda(out.device(), "sum")) { if constexpr (kCudaBuild) return cuda::sum(...); }
//   cpu::sum(...);
// runs_on_cuda throws when `device` is a GPU this build or this machine cannot use (naming the
// reason), and otherwise says whether the op runs on the GPU. core/kernels/<area>.h holds the
// contract; the cpu:: and cuda:: functions are declared in core/cpu/<area>_kernels.h and
// core/cuda/<area>_kernels.h, included by the entry point's file and by the kernels, not by the
// layers above. A CPU-only build reads the cuda:: declarations, which the discarded branch names,
// and never compiles or links a definition.
bool runs_on_cuda(const Device& device, const char* op_name);

}  // namespace sg
