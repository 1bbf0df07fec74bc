#include "core/profiler.h"

#include <array>
#include <mutex>

#include "core/error.h"
#include "core/tensor.h"

namespace sg::profiler {

namespace detail {
std::atomic<bool> recording = false;
}

const char* category_name(Category category) {
  switch (category) {
    case Category::user: return "user";
    case Category::backward: return "backward";
    case Category::dataloader: return "dataloader";
    case Category::optimizer: return "optimizer";
    case Category::collective: return "collective";
    case Category::allocation: return "allocation";
    case Category::gemm: return "gemm";
    case Category::conv: return "conv";
    case Category::attention: return "attention";
    case Category::pointwise: return "pointwise";
    case Category::copy: return "copy";
    case Category::norm: return "norm";
    case Category::softmax: return "softmax";
    case Category::loss: return "loss";
    case Category::reduce: return "reduce";
    case Category::index: return "index";
    case Category::pool: return "pool";
    case Category::random: return "random";
    case Category::optim: return "optim";
    case Category::sort: return "sort";
    case Category::amp: return "amp";
  }
  return "?";
}

namespace {

int64_t now_ns(std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// One thread's events. Only that thread appends; the stopping Profile reads concurrently, so each
// chunk publishes how many of its events are complete with a release store, and a full chunk
// links the next one the same way: the reader sees whole events or none.
class ThreadBuffer {
public:
  ThreadBuffer() : head_(new Chunk), tail_(head_) {}
  ~ThreadBuffer() {
    for (Chunk* chunk = head_; chunk != nullptr;) {
      Chunk* next = chunk->next.load(std::memory_order_relaxed);
      delete chunk;
      chunk = next;
    }
  }
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  void append(Event&& event) {
    size_t count = tail_->count.load(std::memory_order_relaxed);
    if (count == kChunkEvents) {
      Chunk* next = new Chunk;
      tail_->next.store(next, std::memory_order_release);
      tail_ = next;
      count = 0;
    }
    tail_->events[count] = std::move(event);
    tail_->count.store(count + 1, std::memory_order_release);
  }

  void copy_to(std::vector<Event>& out) const {
    for (const Chunk* chunk = head_; chunk != nullptr; chunk = chunk->next.load(std::memory_order_acquire)) {
      const size_t count = chunk->count.load(std::memory_order_acquire);
      out.insert(out.end(), chunk->events.begin(), chunk->events.begin() + static_cast<std::ptrdiff_t>(count));
    }
  }

private:
  static constexpr size_t kChunkEvents = 512;
  struct Chunk {
    std::array<Event, kChunkEvents> events;
    std::atomic<size_t> count = 0;
    std::atomic<Chunk*> next = nullptr;
  };
  Chunk* head_;
  Chunk* tail_;
};

// The buffers of the alive Profile (a session), guarded by session_mutex.
struct Session {
  uint64_t id = 0;
  int profiling_thread = 0;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<ThreadInfo> threads;
};
std::mutex session_mutex;
std::unique_ptr<Session> active_session;      // guarded by session_mutex
std::atomic<uint64_t> active_session_id = 0;  // 0: none; read without the lock
uint64_t last_session_id = 0;                 // guarded by session_mutex
std::atomic<int> next_thread_number = 0;

struct OpenEvent {
  Event event;
  uint64_t session;
};

struct ThreadState {
  int thread = next_thread_number.fetch_add(1, std::memory_order_relaxed);
  std::string name;
  uint64_t session = 0;                  // the session `buffer` belongs to
  std::shared_ptr<ThreadBuffer> buffer;  // shared with the session, which may outlive the thread
  std::vector<OpenEvent> open;           // scopes begun and not yet ended, innermost last
};
thread_local ThreadState this_thread;

// Registers this thread's buffer with the active session on its first event there; returns the
// session's id, or 0 when none is active.
uint64_t join_active_session() {
  const uint64_t active = active_session_id.load(std::memory_order_acquire);
  if (active == 0 || this_thread.session == active) return active;
  std::lock_guard<std::mutex> lock(session_mutex);
  if (!active_session || active_session->id != active) return 0;  // stopped meanwhile
  this_thread.buffer = std::make_shared<ThreadBuffer>();
  this_thread.session = active;
  active_session->buffers.push_back(this_thread.buffer);
  std::string name = this_thread.name;
  if (name.empty())
    name = this_thread.thread == active_session->profiling_thread ? "profiling thread"
                                                                  : "thread " + std::to_string(this_thread.thread);
  active_session->threads.push_back({this_thread.thread, std::move(name)});
  return active;
}

// Appends `event` if the session it was begun in is still the active one.
void append(Event&& event, uint64_t session) {
  if (session != 0 && session == active_session_id.load(std::memory_order_acquire) && session == this_thread.session)
    this_thread.buffer->append(std::move(event));
}

}  // namespace

// ---- Profile ----

Profile::Profile() {
  std::lock_guard<std::mutex> lock(session_mutex);
  SG_CHECK(active_session == nullptr,
           "profiler::Profile: another Profile is alive; stop it first (one recording at a time)");
  active_session = std::make_unique<Session>();
  active_session->id = ++last_session_id;
  result_.profiling_thread = active_session->profiling_thread = this_thread.thread;
  result_.start_ns = now_ns();
  active_session_id.store(active_session->id, std::memory_order_release);
  detail::recording.store(true, std::memory_order_relaxed);
}

Profile::~Profile() { stop(); }

void Profile::stop() {
  if (stopped_) return;
  stopped_ = true;
  detail::recording.store(false, std::memory_order_relaxed);
  result_.end_ns = now_ns();
  std::unique_ptr<Session> session;
  {
    std::lock_guard<std::mutex> lock(session_mutex);
    active_session_id.store(0, std::memory_order_release);
    session = std::move(active_session);
  }
  for (const auto& buffer : session->buffers) buffer->copy_to(result_.events);
  result_.threads = std::move(session->threads);
}

const ProfileResult& Profile::result() const {
  SG_CHECK(stopped_, "profiler::Profile::result: the Profile is still recording; call stop() first");
  return result_;
}

// ---- recording ----

namespace {
// An event of this thread, nested in the scopes open on it now.
Event event_here(std::string_view name, Category category, int64_t start_ns, int64_t end_ns, int64_t bytes) {
  Event event;
  event.name = std::string(name);
  event.category = category;
  event.start_ns = start_ns;
  event.end_ns = end_ns;
  event.thread = this_thread.thread;
  event.depth = static_cast<int>(this_thread.open.size());
  event.bytes = bytes;
  return event;
}
}  // namespace

bool RecordScope::begin(std::string_view name, Category category) {
  const uint64_t session = join_active_session();
  if (session == 0) return false;
  this_thread.open.push_back({event_here(name, category, now_ns(), 0, 0), session});
  return true;
}

void RecordScope::add_input(const Tensor& input) {
  this_thread.open.back().event.input_shapes.push_back(input.defined() ? input.sizes() : Shape{});
}

void RecordScope::end() {
  OpenEvent open = std::move(this_thread.open.back());
  this_thread.open.pop_back();
  open.event.end_ns = now_ns();
  append(std::move(open.event), open.session);
}

void detail::record_allocation(size_t bytes, const Device& device) {
  const uint64_t session = join_active_session();
  if (session == 0) return;
  const auto size = static_cast<int64_t>(bytes);
  if (!this_thread.open.empty()) this_thread.open.back().event.allocated_bytes += size;
  const int64_t now = now_ns();
  Event event = event_here(device.is_cpu() ? "[memory]" : "[cuda memory]", Category::allocation, now, now, size);
  event.allocated_bytes = size;
  append(std::move(event), session);
}

void detail::record_span(std::string_view name, Category category, std::chrono::steady_clock::time_point start,
                         std::chrono::steady_clock::time_point end, int64_t bytes) {
  const uint64_t session = join_active_session();
  append(event_here(name, category, now_ns(start), now_ns(end), bytes), session);
}

void set_thread_name(std::string name) { this_thread.name = std::move(name); }

}  // namespace sg::profiler
