#pragma once
// defines: cuda::PerDevice<T> — one T per GPU (a caching allocator, a cuBLAS or cuDNN handle),
//          made on first use with that GPU current, and never destroyed: tensors and handles may
//          still be released during static destruction, after the CUDA runtime has been torn
//          down, and freeing into a destroyed object would crash. Hold the PerDevice itself
//          the same way: `static auto* handles = new PerDevice<...>(...)`.
#include <array>
#include <mutex>

#include "core/cuda_runtime/runtime.h"
#include "core/cuda_runtime/stream.h"
#include "core/error.h"

namespace sg::cuda {

inline constexpr int kMaxDevices = 64;

template <typename T>
class PerDevice {
public:
  // `what` names the owner in the error for a device that does not exist ("cuBLAS").
  explicit PerDevice(const char* what) : what_(what) {}

  // The T of `device`, made by make() (returning a new T*) the first time.
  template <typename Make>
  T& get(int device, Make&& make) {
    SG_CHECK(device >= 0 && device < device_count() && device < kMaxDevices, what_, ": no device cuda:", device,
             " (this machine has ", device_count(), " GPU(s))");
    std::lock_guard lock(mutex_);
    if (items_[device] == nullptr) {
      DeviceGuard guard(device);  // handles and memory belong to the device current when made
      items_[device] = make();
    }
    return *items_[device];
  }

private:
  const char* what_;
  std::mutex mutex_;
  std::array<T*, kMaxDevices> items_{};
};

}  // namespace sg::cuda
