#include "core/device.h"

#include "core/error.h"

namespace sg {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

void check_device_supported(const Device& device, const char* op_name) {
  SG_CHECK(device.is_cpu(), op_name, ": no kernel for device ", device,
           " (this build of syncgrad runs on the CPU only)");
}

}  // namespace sg
