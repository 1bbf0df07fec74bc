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

// Throws sg::Error if no kernels exist for `device` in this build or on this machine.
// Every op calls it at its dispatch point, so a CUDA tensor fails with a message, not a crash.
void check_device_supported(const Device& device, const char* op_name);

}  // namespace sg
