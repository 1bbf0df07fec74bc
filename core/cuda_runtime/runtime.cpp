// The sg::cuda API of a CUDA build: what the driver reports, checked calls, device switching.
#include "core/cuda_runtime/runtime.h"

#include <string>

#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/device_allocator.h"
#include "core/cuda_runtime/stream.h"
#include "core/error.h"

namespace sg::cuda {

namespace detail {
void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // clears the error unless it is sticky (then the context is lost anyway)
  SG_FAIL("CUDA error ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ") in ", call, " at ", file, ":",
          line);
}
}  // namespace detail

namespace {
// Asked once: the driver's answer does not change while the process runs. Without a GPU (or
// without a driver) cudaGetDeviceCount fails (error 35, insufficient driver) and leaves the
// count unset, so the count starts at 0 and any error means "no GPU".
struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      p.reason = ::sg::detail::concat("the CUDA driver reports ", cudaGetErrorName(status), " (",
                                      cudaGetErrorString(status), "): no usable GPU on this machine");
    } else if (count == 0) {
      p.reason = "no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES)";
    } else {
      p.count = count;
    }
    return p;
  }();
  return result;
}

void require_available(const char* what) {
  if (!is_available()) SG_FAIL("cuda::", what, ": ", unavailable_reason());
}
}  // namespace

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

int current_device() {
  require_available("current_device");
  int index = 0;
  SG_CUDA_CHECK(cudaGetDevice(&index));
  return index;
}

void set_device(int index) {
  require_available("set_device");
  SG_CHECK(index >= 0 && index < device_count(), "cuda::set_device: no device cuda:", index, " (this machine has ",
           device_count(), " GPU(s))");
  SG_CUDA_CHECK(cudaSetDevice(index));
}

void synchronize() {
  require_available("synchronize");
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

MemoryStats memory_stats(int device) {
  require_available("memory_stats");
  return device_block_cache(device).stats();
}

void reset_peak_memory_stats(int device) {
  require_available("reset_peak_memory_stats");
  device_block_cache(device).reset_peak();
}

void empty_cache() {
  if (!is_available()) return;
  for (int device = 0; device < device_count(); ++device) {
    DeviceGuard guard(device);
    device_block_cache(device).empty_cache();
  }
}

DeviceGuard::DeviceGuard(int index) {
  const cudaError_t status = cudaGetDevice(&previous_);
  if (status == cudaErrorCudartUnloading) return;  // Note [Freeing after the CUDA runtime has gone]
  SG_CUDA_CHECK(status);
  if (previous_ != index) {
    SG_CUDA_CHECK(cudaSetDevice(index));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);  // a destructor cannot throw; the switch back cannot fail
}

}  // namespace sg::cuda
