// The sg::cuda API of a CPU-only build: nothing is available, and any use says so.
#include <atomic>

#include "core/cuda_runtime/event.h"
#include "core/cuda_runtime/runtime.h"
#include "core/error.h"

namespace sg::cuda {

namespace {
[[noreturn]] void unavailable(const char* what) { SG_FAIL("cuda::", what, ": ", unavailable_reason()); }
}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() {
  return "this build of syncgrad has no CUDA backend (nvcc was not found at configure time, or SG_CUDA=OFF)";
}
int current_device() { unavailable("current_device"); }
void set_device(int) { unavailable("set_device"); }
void synchronize() { unavailable("synchronize"); }
MemoryStats memory_stats(int) { unavailable("memory_stats"); }
void reset_peak_memory_stats(int) { unavailable("reset_peak_memory_stats"); }
void empty_cache() {}  // nothing is cached, so there is nothing to give back

// An Event cannot be created here, so its other members are never reached on an object.
Event::Event(bool) { unavailable("Event"); }
Event::~Event() = default;
void Event::record() { unavailable("Event::record"); }
bool Event::query() const { unavailable("Event::query"); }
void Event::synchronize() const { unavailable("Event::synchronize"); }
double Event::elapsed_ms(const Event&) const { unavailable("Event::elapsed_ms"); }
void Event::record_on(void*) { unavailable("Event::record_on"); }
void Event::block(void*) const { unavailable("Event::block"); }

namespace {
std::atomic<bool> tf32_allowed{false};
}  // namespace
void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

}  // namespace sg::cuda
