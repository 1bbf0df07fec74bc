#include "core/cuda_runtime/event.h"

#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/runtime.h"
#include "core/cuda_runtime/stream.h"
#include "core/error.h"

namespace sg::cuda {

namespace {
cudaEvent_t as_event(void* handle) { return static_cast<cudaEvent_t>(handle); }
}  // namespace

Event::Event(bool timing) : device_(current_device()) {
  cudaEvent_t event = nullptr;
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  event_ = event;
}

Event::~Event() { cudaEventDestroy(as_event(event_)); }  // the driver frees it once the GPU has passed it

void Event::record() {
  DeviceGuard guard(device_);
  SG_CUDA_CHECK(cudaEventRecord(as_event(event_), compute_stream()));
}

bool Event::query() const {
  const cudaError_t status = cudaEventQuery(as_event(event_));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error to report later
    return false;
  }
  SG_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const { SG_CUDA_CHECK(cudaEventSynchronize(as_event(event_))); }

void Event::record_on(void* stream) {
  DeviceGuard guard(device_);
  SG_CUDA_CHECK(cudaEventRecord(as_event(event_), static_cast<cudaStream_t>(stream)));
}

void Event::block(void* stream) const {
  SG_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), as_event(event_), 0));
}

double Event::elapsed_ms(const Event& later) const {
  float ms = 0;
  SG_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(event_), as_event(later.event_)));
  return ms;
}

}  // namespace sg::cuda
