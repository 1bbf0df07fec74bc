#include "core/device.h"

#include "core/cuda_runtime/runtime.h"
#include "core/error.h"

namespace sg {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

bool runs_on_cuda(const Device& device, const char* op_name) {
  if (device.is_cpu()) return false;
  SG_CHECK(cuda::is_available(), op_name, ": the tensor is on ", device,
           " but CUDA is not available: ", cuda::unavailable_reason());
  SG_CHECK(device.index >= 0 && device.index < cuda::device_count(), op_name, ": there is no device ", device,
           " (this machine has ", cuda::device_count(), " GPU(s))");
  return true;
}

}  // namespace sg
