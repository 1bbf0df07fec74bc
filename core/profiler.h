#pragma once
// defines: profiler::Profile (records what runs while it is alive, as torch.profiler.profile),
//          profiler::RecordScope (a timed region: an op, a backward node, a user's own region, as
//          torch.profiler.record_function), profiler::Event, profiler::Category, and the recording
//          calls of the sites that are not scopes (allocations, collectives timed elsewhere).
//          Output (Chrome trace, key_averages table) is in log/profiler_report.h.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/shape.h"

namespace sg {
class Tensor;
}

namespace sg::profiler {

// Note [Profiler recording]
// Every recording site starts with is_enabled(), one relaxed atomic load: with no Profile alive
// that is all a site costs (a kernel call, an allocation, a backward node, a loader wait). While a
// Profile is alive a site writes its event into a buffer of its own thread, taking no lock: each
// thread registers one buffer with the Profile the first time it records (a lock, once per thread
// and Profile), then appends to it alone. An event is written when its scope ends, complete;
// the scopes still open on a thread are kept on a thread-local stack, so an allocation can be
// charged to the innermost one and each event knows its depth. Events on one thread nest (they
// are RAII scopes), which is what self time (total minus the children) relies on.
// Kernel events time the host side of the call: on a GPU that is the launch, not the kernel.

// What an event is. Kernel events carry the kernel's area (core/kernels/<area>.cpp), so a report
// can group them by kind (gemm, conv, pointwise, ...).
enum class Category : uint8_t {
  user,        // a RecordScope of the program's own
  backward,    // one backward node run by the autograd engine ("MmBackward")
  dataloader,  // the training loop waiting for its next batch
  optimizer,   // an optimizer's step
  collective,  // all_reduce, broadcast, ... on the thread that runs it
  allocation,  // a Storage allocated (an instant: start == end)
  gemm,        // kernels from here on
  conv,
  attention,
  pointwise,
  copy,
  norm,
  softmax,
  loss,
  reduce,
  index,
  pool,
  random,
  optim,
  sort,
  amp,
};
const char* category_name(Category category);

struct Event {
  std::string name;
  Category category = Category::user;
  int64_t start_ns = 0, end_ns = 0;  // steady clock, as ChromeTrace's
  int thread = 0;                    // the profiler's number of the recording thread
  int depth = 0;                     // scopes open around it on its thread when it began
  std::vector<Shape> input_shapes;   // kernels and backward nodes
  int64_t bytes = 0;                 // collective: the tensor's bytes; allocation: its size
  int64_t allocated_bytes = 0;       // allocated while it was the innermost open event (allocation: its size)

  int64_t duration_ns() const { return end_ns - start_ns; }
};

struct ThreadInfo {
  int thread = 0;
  std::string name;  // set_thread_name's, or "thread N"
};

// What a Profile recorded, once it stopped.
struct ProfileResult {
  std::vector<Event> events;  // in no particular order across threads
  std::vector<ThreadInfo> threads;
  int profiling_thread = 0;  // the thread that made the Profile
  int64_t start_ns = 0, end_ns = 0;
};

namespace detail {
extern std::atomic<bool> recording;
void record_allocation(size_t bytes, const Device& device);
void record_span(std::string_view name, Category category, std::chrono::steady_clock::time_point start,
                 std::chrono::steady_clock::time_point end, int64_t bytes);
}  // namespace detail

// The check every site makes first (Note [Profiler recording]).
inline bool is_enabled() { return detail::recording.load(std::memory_order_relaxed); }

// Records while alive; at most one exists at a time. stop() ends the recording and gathers every
// thread's events (the destructor stops too); result() is valid after stop().
class Profile {
public:
  Profile();
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  void stop();
  const ProfileResult& result() const;

private:
  bool stopped_ = false;
  ProfileResult result_;
};

// A timed region: `RecordScope scope("attention block", Category::user);` around a block of user
// code, and the same at every kernel dispatch with the input tensors, whose shapes are recorded.
class RecordScope {
public:
  RecordScope(std::string_view name, Category category) {
    if (is_enabled()) [[unlikely]]
      recording_ = begin(name, category);
  }
  template <typename... Tensors>
  RecordScope(std::string_view name, Category category, const Tensors&... inputs) {
    if (is_enabled()) [[unlikely]] {
      recording_ = begin(name, category);
      if (recording_) (add_input(inputs), ...);
    }
  }
  ~RecordScope() {
    if (recording_) [[unlikely]]
      end();
  }
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

private:
  static bool begin(std::string_view name, Category category);
  static void add_input(const Tensor& input);  // its shape; [] for an undefined tensor
  static void end();
  bool recording_ = false;
};

// A storage of `bytes` on `device` was allocated (core/storage.cpp).
inline void record_allocation(size_t bytes, const Device& device) {
  if (is_enabled()) [[unlikely]]
    detail::record_allocation(bytes, device);
}

// An event whose times were taken elsewhere, e.g. a collective on its communication thread.
inline void record_span(std::string_view name, Category category, std::chrono::steady_clock::time_point start,
                        std::chrono::steady_clock::time_point end, int64_t bytes) {
  if (is_enabled()) [[unlikely]]
    detail::record_span(name, category, start, end, bytes);
}

// Names the calling thread's row in traces ("communication", "DataLoader worker 2").
void set_thread_name(std::string name);

}  // namespace sg::profiler
