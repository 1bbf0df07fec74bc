#include "dist/shm_all_reduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "dist/environment.h"
#include "dist/tcp_store.h"

// Note [A shared-memory all-reduce beside Gloo]
// Gloo moves every byte of a collective through TCP, also between two processes on one machine:
// its all-reduce of ResNet34's 85 MB of gradients takes 92 ms between two ranks on this
// project's 2-vCPU machine (0.97 GB/s, `bench_allreduce`), CPU time taken from the backward pass
// it overlaps. When every rank of a group runs on one machine, all_reduce goes through shared
// memory instead, and so do broadcast and the flat reduce_scatter_tensor and
// all_gather_into_tensor; every other collective stays Gloo's. A group that spans machines uses
// the all-reduce among each machine's ranks (Note [A hierarchical all-reduce across machines]).
//
// Each rank maps a segment of its own and everyone else's: a header (two counters, its pid, and
// which collective of what size it is in, checked against the others' as they arrive),
// an input area of kChunkBytes and two output areas. A tensor is reduced in rounds of one chunk:
//   1. each rank copies its chunk into its input area and raises its `arrived` counter;
//   2. once every rank has arrived, rank r reduces the r-th slice of the chunk over all the
//      ranks' inputs, in rank order, into its output area, and raises `reduced`
//      (a reduce-scatter: each slice is computed once, by one rank);
//   3. once every rank has reduced, each copies all the slices into its tensor (an all-gather).
// So every rank ends with the same bits. Safety of the reuse: a rank overwrites its input in the
// next round only after every rank has reduced this one, so nobody reads it any more; it writes
// an output area again two rounds later, after every rank has arrived at the round between, so
// everybody has copied out of it.
//
// Counters are 32-bit atomics in the shared header, written with release and read with acquire.
// A waiting rank spins a little, then sleeps on the counter with futex (the cross-process kind),
// woken by the writer; every 100 ms it checks the peer it waits for is still alive (same machine,
// same pid namespace: connect() checks both) and it gives up at the timeout. The segments have no
// names, so that nothing outlives the job (Note [Segments with no name]).
//
// Note [Segments with no name]
// A segment must not outlive its job, however a rank ends: a SIGTERM from sgrun or a scheduler
// (which ends a process without running destructors), a SIGKILL, a crash, at any moment. Named
// segments (shm_open) cannot promise it: between a segment's creation and the unlink of its name
// the ranks wait for each other through the store, and a rank stopped there left its 12 MB in
// /dev/shm until reboot. Blocking signals over that window cannot hold off a SIGKILL, and a
// launcher that removes the names after its workers exit helps neither ranks started by anything
// else (threads, torchrun, Slurm) nor a launcher that is itself killed.
// So a segment is anonymous memory (memfd_create), which the kernel frees when the last process
// that maps it or holds its descriptor is gone; there is nothing to remove, in any window. A peer
// attaches by opening the creator's descriptor as /proc/<pid>/fd/<n>, a path the creator publishes
// in the store: that opens the same memory again, which the kernel allows between processes of
// one user (it checks what reading the creator's memory would need; a process made undumpable
// refuses it, and the group then uses Gloo, saying why).
// The creator keeps the descriptor open until every rank has mapped the segment or given up, and
// closes it as connect() returns. A restarted group makes new segments, which cannot meet the old
// ones. The header carries the group's random id, checked after mapping, so a path that now names
// something else (its creator died and the pid was reused) is refused, never used.

namespace sg::dist {

// Note [Buckets in shared memory]
// Through the segments, an all-reduce of n bytes moves about 7n bytes of memory on each rank: n
// copied in (read and written), half of n reduced (two halves read, one written), n copied out
// (read and written), and for AVG one more pass over n to divide. On a machine whose ranks share
// the cores, that memory traffic is taken from the backward pass it overlaps: ResNet34's 85 MB of
// gradients cost each rank tens of milliseconds of CPU a step.
// A tensor that every rank all-reduces again and again, such as a DDP gradient bucket, can
// instead live in memory that every rank maps (allocate_shared: one anonymous segment per rank
// and buffer, made as in Note [Segments with no name]). Then rank r reduces the r-th slice of the
// tensor straight from every rank's copy, a block at a time through a small scratch area where it
// also divides (FinishFunction), and writes the block over the r-th slice of every rank's copy:
// n bytes read and n written by each rank, and no copy of the whole tensor on any rank. (Writing
// the result into its own copy only, and letting each rank copy the others' finished slices, moves
// 2.5n bytes with two ranks.)
// Only rank r reads or writes anyone's slice r, so the blocks need no ordering among themselves.
// The counters order the rest: every rank has arrived before anybody reads its data, and every
// rank has reduced before the call returns, since the caller's next write into its buffer (the
// next backward) would change what a slower rank still reads.
// The result has the bits of the path through the segments: the same ranks' values summed in
// the same order by the slice's rank.

struct SharedMemoryAllReduce::Header {
  alignas(64) std::atomic<uint32_t> arrived{0};
  alignas(64) std::atomic<uint32_t> reduced{0};
  alignas(64) pid_t pid = 0;
  uint64_t group = 0;  // the group's random id (Note [Segments with no name])
  // The collective in progress, to catch ranks that disagree: which one, its size, and for an
  // all-reduce in place the buffer's id (0: none) and the offset in it.
  Call call_kind = Call::all_reduce;
  uint64_t call_bytes = 0, call_buffer = 0, call_offset = 0;
  // The last collective of the group this rank started (Note [Marks in the segments]); -1: none.
  std::atomic<int64_t> started{-1};
};

// A buffer of allocate_shared: every rank's part, mapped here (ours too), unmapped with the last
// pointer to it.
struct SharedMemoryAllReduce::SharedBuffer {
  uint64_t id = 0;
  size_t bytes = 0;
  std::vector<char*> parts;  // per rank
  ~SharedBuffer() {
    for (char* part : parts)
      if (part != nullptr) ::munmap(part, bytes);
  }
};

namespace {

static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

constexpr size_t kHeaderBytes = 4096;
constexpr size_t kSegmentBytes = kHeaderBytes + 3 * SharedMemoryAllReduce::kChunkBytes;

// Wraparound-safe "counter has reached round".
bool reached(uint32_t counter, uint32_t round) { return static_cast<int32_t>(counter - round) >= 0; }

void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::milliseconds at_most) {
  const timespec wait{0, static_cast<long>(std::chrono::nanoseconds(at_most).count())};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &wait, nullptr, 0);
}

void raise_counter(std::atomic<uint32_t>& word, uint32_t round) {
  word.store(round, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// The collective as the errors name it ("all-reduce"; "all-reduces" with an s).
std::string name_of(SharedMemoryAllReduce::Call kind) {
  switch (kind) {
    case SharedMemoryAllReduce::Call::all_reduce: return "all-reduce";
    case SharedMemoryAllReduce::Call::broadcast: return "broadcast";
    case SharedMemoryAllReduce::Call::reduce_scatter: return "reduce-scatter";
    case SharedMemoryAllReduce::Call::all_gather: return "all-gather";
  }
  return "collective";
}

// A process that exited but is not reaped yet (a zombie) still answers kill(pid, 0).
bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t name_end = text.rfind(')');
  return name_end == std::string::npos || name_end + 2 >= text.size() ||
         (text[name_end + 2] != 'Z' && text[name_end + 2] != 'X');
}

// Maps the `bytes` of the segment `fd` refers to; nullptr with `why_not` set on failure.
void* map_segment(int fd, size_t bytes, std::string& why_not) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory != MAP_FAILED) return memory;
  why_not = detail::concat("mmap: ", std::strerror(errno));
  return nullptr;
}

// A new segment of `bytes`, mapped into `memory`, its memory reserved (so a lack of memory is an
// error here rather than a SIGBUS later). Returns its descriptor, or -1 with `why_not` set.
int create_segment(size_t bytes, void*& memory, std::string& why_not) {
  const int fd = ::memfd_create("syncgrad-shm-all-reduce", MFD_CLOEXEC);
  if (fd < 0) {
    why_not = detail::concat("memfd_create: ", std::strerror(errno));
    return -1;
  }
  if (const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0)
    why_not = detail::concat("cannot reserve ", bytes >> 20, " MB of shared memory: ", std::strerror(error));
  else memory = map_segment(fd, bytes, why_not);
  if (memory != nullptr) return fd;
  ::close(fd);
  return -1;
}

// Maps the segment of `bytes` another rank created, through the path of its descriptor; nullptr
// with `why_not` set on failure.
void* open_segment(const std::string& path, size_t bytes, std::string& why_not) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    why_not = detail::concat("open('", path, "'): ", std::strerror(errno),
                             " (the ranks must run as one user, and be dumpable)");
    return nullptr;
  }
  void* memory = nullptr;
  struct stat file {};
  if (::fstat(fd, &file) != 0 || static_cast<size_t>(file.st_size) != bytes)
    why_not = detail::concat("'", path, "' is not a segment of ", bytes, " bytes");
  else memory = map_segment(fd, bytes, why_not);
  ::close(fd);
  return memory;
}

// Our own segment's descriptor, closed when connect() returns or throws.
struct OwnDescriptor {
  int fd = -1;
  OwnDescriptor() = default;
  OwnDescriptor(const OwnDescriptor&) = delete;
  OwnDescriptor& operator=(const OwnDescriptor&) = delete;
  ~OwnDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::string text_of(const std::vector<char>& bytes) { return std::string(bytes.begin(), bytes.end()); }

// Each rank's answer at the two steps of connect() goes through the store as one character and a
// text: ready (and, after creating, this machine's identity), a failure, or not applicable here.
constexpr char kReady = '1', kFailed = 'F', kNotHere = 'N';

// The inode of /proc/self/ns/<kind>, which names this process's namespace of that kind; 0 when unknown.
ino_t namespace_of(const char* kind) {
  struct stat namespace_file {};
  return ::stat((std::string("/proc/self/ns/") + kind).c_str(), &namespace_file) == 0 ? namespace_file.st_ino : 0;
}

}  // namespace

std::string machine_identity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  return detail::concat(boot_id, "/", namespace_of("pid"), "/", namespace_of("net"), "/",
                        machine_label_from_environment());
}

std::unique_ptr<SharedMemoryAllReduce> SharedMemoryAllReduce::connect(TcpStore& store, int rank, int size, bool enabled,
                                                                      Unavailable& why_not,
                                                                      const std::string& key_prefix,
                                                                      std::vector<int> group_ranks) {
  if (group_ranks.empty())
    for (int r = 0; r < size; ++r) group_ranks.push_back(r);
  if (rank == 0) {
    std::random_device random;
    const std::string id = std::to_string((uint64_t{random()} << 32) ^ random());
    store.set(key_prefix + "group", std::vector<char>(id.begin(), id.end()));
  }
  const uint64_t group = std::stoull(text_of(store.get(key_prefix + "group")));
  const std::string identity = machine_identity();
  std::unique_ptr<SharedMemoryAllReduce> self(new SharedMemoryAllReduce(rank, size, group_ranks));
  self->segments_.assign(static_cast<size_t>(size), nullptr);
  self->pids_.assign(static_cast<size_t>(size), 0);
  const auto publish = [&](const std::string& key, const std::string& answer) {
    store.set(key_prefix + key + std::to_string(rank), std::vector<char>(answer.begin(), answer.end()));
  };
  const auto answer_of = [&](const std::string& key, int r) {
    const std::string answer = text_of(store.get(key_prefix + key + std::to_string(r)));
    return answer.empty() ? std::string(1, kFailed) : answer;
  };
  const auto name = [&](int r) { return group_ranks[static_cast<size_t>(r)]; };
  // 1. Each rank creates its segment and says where the others can open it, or says why not.
  OwnDescriptor own;
  std::string created(1, kNotHere);
  if (!enabled) {
    created += "it is turned off there (SG_SHM_ALLREDUCE=0)";
  } else if (std::string failure; (own.fd = create_segment(kSegmentBytes, self->segments_[rank], failure)) >= 0) {
    Header* header = new (self->segments_[rank]) Header;
    header->pid = ::getpid();
    header->group = group;
    publish("path/", detail::concat("/proc/", header->pid, "/fd/", own.fd));
    created = kReady + identity;
  } else {
    created = kFailed + failure;
  }
  publish("created/", created);
  // 2. Each maps the others' (when every rank created one, on this machine).
  std::string problem;  // as an answer: kFailed or kNotHere, then the reason
  for (int r = 0; r < size && problem.empty(); ++r) {
    const std::string theirs = answer_of("created/", r);
    if (theirs[0] != kReady) problem = theirs[0] + detail::concat("rank ", name(r), ": ", theirs.substr(1));
    else if (theirs.substr(1) != identity)
      problem = kNotHere + detail::concat("rank ", name(r), " runs on another machine");
  }
  for (int r = 0; r < size && problem.empty(); ++r) {
    if (r == rank) continue;
    std::string reason;
    self->segments_[r] =
        open_segment(text_of(store.get(key_prefix + "path/" + std::to_string(r))), kSegmentBytes, reason);
    if (self->segments_[r] == nullptr)
      problem = kFailed + detail::concat("rank ", name(rank), " mapping rank ", name(r), "'s segment: ", reason);
    else if (self->header(r).group != group)
      problem = kFailed + detail::concat("rank ", name(rank), ": what rank ", name(r), " published is not its segment");
    else self->pids_[r] = self->header(r).pid;
  }
  publish("opened/", problem.empty() ? std::string(1, kReady) : problem);
  // 3. Everyone has mapped our segment or given up: our descriptor can go (as this returns).
  for (int r = 0; r < size; ++r) {
    const std::string theirs = answer_of("opened/", r);
    if (theirs[0] != kReady && why_not.reason.empty()) why_not = {theirs.substr(1), theirs[0] == kFailed};
  }
  if (!why_not.reason.empty()) return nullptr;
  self->pids_[rank] = ::getpid();
  self->key_prefix_ = key_prefix;
  return self;
}

SharedMemoryAllReduce::~SharedMemoryAllReduce() {
  for (void* segment : segments_)
    if (segment != nullptr) ::munmap(segment, kSegmentBytes);
}

// Note [Marks in the segments]
// Before each collective a rank says which one it starts, so that after a failure the others can
// tell who never reached it (dist::diagnose_failure). Through the store that was a request to
// rank 0's store thread per collective: on 2 vCPUs whose cores the ranks fill, 50-60 microseconds
// of a small all-reduce's 130-160 (docs/performance.md, "Data-parallel training"). When every rank
// is on this machine the mark is one atomic store into this rank's segment header, which the
// others read where it lies.
void SharedMemoryAllReduce::mark_started(int64_t sequence) {
  header(rank_).started.store(sequence, std::memory_order_release);
}

int64_t SharedMemoryAllReduce::started(int r) const { return header(r).started.load(std::memory_order_acquire); }

SharedMemoryAllReduce::Header& SharedMemoryAllReduce::header(int r) const {
  return *static_cast<Header*>(segments_[static_cast<size_t>(r)]);
}
char* SharedMemoryAllReduce::input(int r) const {
  return static_cast<char*>(segments_[static_cast<size_t>(r)]) + kHeaderBytes;
}
char* SharedMemoryAllReduce::output(int r, uint32_t round) const { return input(r) + kChunkBytes * (1 + (round & 1)); }

void SharedMemoryAllReduce::wait_for(int r, Stage stage, uint32_t round,
                                     std::chrono::steady_clock::time_point deadline) const {
  std::atomic<uint32_t>& counter = counter_of(r, stage);
  // Note [A short spin before the sleep]
  // A peer a few microseconds behind is cheaper to spin for than to sleep for: a futex wake-up
  // costs tens of microseconds. But a spinning thread holds a core, and when the ranks' compute
  // threads fill every core (the usual case: sgrun gives each rank its share of the cores), it
  // takes the core from a compute thread, its own rank's or the very peer's it waits for. On 2
  // vCPUs with 2 ranks x 1 thread (docs/performance.md, "Data-parallel training"), DDP's ResNet34
  // step, with ten meeting points, ran 1.3% faster spinning 50 or 0 microseconds than 300; the
  // CNN's, with three, was level at 50 and 300, and now and then 10% slower with no spin at all.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (std::chrono::steady_clock::now() < spin_until)
    if (reached(counter.load(std::memory_order_acquire), round)) return;
  auto next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (;;) {
    const uint32_t seen = counter.load(std::memory_order_acquire);
    if (reached(seen, round)) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw std::runtime_error(detail::concat("rank ", group_rank(r), " did not ",
                                              stage == Stage::arrived ? "arrive at" : "finish its part of",
                                              " the shared-memory ", name_of(header(rank_).call_kind), " in time"));
    if (now >= next_look) {
      if (!process_alive(pids_[static_cast<size_t>(r)]))
        throw std::runtime_error(detail::concat("rank ", group_rank(r), " (pid ", pids_[static_cast<size_t>(r)],
                                                ") exited during the shared-memory ",
                                                name_of(header(rank_).call_kind)));
      next_look = now + std::chrono::milliseconds(100);
    }
    futex_wait(counter, seen, std::chrono::milliseconds(10));
  }
}

std::atomic<uint32_t>& SharedMemoryAllReduce::counter_of(int r, Stage stage) const {
  Header& h = header(r);
  return stage == Stage::arrived ? h.arrived : h.reduced;
}

void SharedMemoryAllReduce::raise_and_wait_for_everyone(Stage stage, uint32_t round,
                                                        std::chrono::steady_clock::time_point deadline) {
  raise_counter(counter_of(rank_, stage), round);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    wait_for(r, stage, round, deadline);
    if (stage == Stage::arrived) check_same_call(r);
  }
}

void SharedMemoryAllReduce::announce_call(Call kind, uint64_t bytes, uint64_t buffer, uint64_t offset) {
  Header& mine = header(rank_);
  mine.call_kind = kind;
  mine.call_bytes = bytes;
  mine.call_buffer = buffer;
  mine.call_offset = offset;
}

void SharedMemoryAllReduce::check_same_call(int r) const {
  const Header &theirs = header(r), &mine = header(rank_);
  // Two collectives of the same size but different kinds would read each other's bytes as their
  // own: silent garbage, where Gloo's TCP would have timed out.
  if (theirs.call_kind != mine.call_kind)
    throw std::runtime_error(detail::concat("rank ", group_rank(r), " ", name_of(theirs.call_kind), "s, rank ",
                                            group_rank(rank_), " ", name_of(mine.call_kind), "s",
                                            ": every rank must call the same collective"));
  if (theirs.call_bytes != mine.call_bytes)
    throw std::runtime_error(detail::concat("rank ", group_rank(r), " ", name_of(mine.call_kind), "s ",
                                            theirs.call_bytes, " bytes, rank ", group_rank(rank_), " ", mine.call_bytes,
                                            ": every rank must pass the same shape and dtype"));
  const auto where = [](const Header& h) {
    return h.call_buffer == 0 ? std::string("memory of its own")
                              : detail::concat("shared buffer ", h.call_buffer, " at byte ", h.call_offset);
  };
  if (theirs.call_buffer != mine.call_buffer || theirs.call_offset != mine.call_offset)
    throw std::runtime_error(detail::concat("rank ", group_rank(r), " all-reduces a tensor in ", where(theirs),
                                            ", rank ", group_rank(rank_), " in ", where(mine),
                                            ": every rank must pass the same tensor of a shared buffer, or none"));
}

std::shared_ptr<char> SharedMemoryAllReduce::allocate_shared(TcpStore& store, size_t bytes, std::string& why_not) {
  auto buffer = std::make_shared<SharedBuffer>();
  {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    buffer->id = ++buffers_allocated_;
  }
  buffer->bytes = std::max<size_t>(bytes, 1);  // mmap refuses 0 bytes
  buffer->parts.assign(static_cast<size_t>(size_), nullptr);
  const std::string prefix = detail::concat(key_prefix_, "buffer", buffer->id, "/");
  const auto publish = [&](const std::string& key, const std::string& answer) {
    store.set(prefix + key + std::to_string(rank_), std::vector<char>(answer.begin(), answer.end()));
  };
  const auto answer_of = [&](const std::string& key, int r) {
    const std::string answer = text_of(store.get(prefix + key + std::to_string(r)));
    return answer.empty() ? std::string(1, kFailed) : answer;
  };
  // The steps of connect(), on ranks already known to share the machine: create ours, map the
  // others', and keep our descriptor open until everybody has mapped it or given up.
  OwnDescriptor own;
  std::string failure;
  void* part = nullptr;
  own.fd = create_segment(buffer->bytes, part, failure);
  buffer->parts[static_cast<size_t>(rank_)] = static_cast<char*>(part);
  publish("path/", own.fd >= 0 ? detail::concat(kReady, "/proc/", ::getpid(), "/fd/", own.fd) : kFailed + failure);
  std::string problem;
  for (int r = 0; r < size_ && problem.empty(); ++r) {
    const std::string theirs = answer_of("path/", r);
    if (theirs[0] != kReady) problem = detail::concat("rank ", group_rank(r), ": ", theirs.substr(1));
    else if (r != rank_) {
      std::string reason;
      buffer->parts[static_cast<size_t>(r)] = static_cast<char*>(open_segment(theirs.substr(1), buffer->bytes, reason));
      if (buffer->parts[static_cast<size_t>(r)] == nullptr)
        problem = detail::concat("rank ", group_rank(rank_), " mapping rank ", group_rank(r), "'s buffer: ", reason);
    }
  }
  publish("opened/", problem.empty() ? std::string(1, kReady) : kFailed + problem);
  for (int r = 0; r < size_; ++r) {
    const std::string theirs = answer_of("opened/", r);
    if (theirs[0] != kReady && why_not.empty()) why_not = theirs.substr(1);
  }
  if (!why_not.empty()) return nullptr;
  {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    std::erase_if(buffers_, [](const std::weak_ptr<SharedBuffer>& b) { return b.expired(); });
    buffers_.push_back(buffer);
  }
  char* ours = buffer->parts[static_cast<size_t>(rank_)];
  return std::shared_ptr<char>(std::move(buffer), ours);
}

std::shared_ptr<SharedMemoryAllReduce::SharedBuffer> SharedMemoryAllReduce::buffer_holding(const void* data,
                                                                                           size_t bytes) {
  const auto* begin = static_cast<const char*>(data);
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  for (const auto& weak : buffers_)
    if (auto buffer = weak.lock()) {
      const char* part = buffer->parts[static_cast<size_t>(rank_)];
      if (begin >= part && begin + bytes <= part + buffer->bytes) return buffer;
    }
  return nullptr;
}

void SharedMemoryAllReduce::all_reduce(void* data, size_t count, size_t element_size, const ReduceFunction& reduce,
                                       std::chrono::milliseconds timeout, const FinishFunction& finish) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (auto buffer = buffer_holding(data, count * element_size)) {
    const auto offset = static_cast<size_t>(static_cast<char*>(data) - buffer->parts[static_cast<size_t>(rank_)]);
    all_reduce_in_place(*buffer, offset, count, element_size, reduce, finish, deadline);
  } else {
    all_reduce_through_segments(static_cast<char*>(data), count, element_size, reduce, finish, deadline);
  }
}

void SharedMemoryAllReduce::all_reduce_through_segments(char* data, size_t count, size_t element_size,
                                                        const ReduceFunction& reduce, const FinishFunction& finish,
                                                        std::chrono::steady_clock::time_point deadline) {
  const size_t per_round = kChunkBytes / element_size;
  announce_call(Call::all_reduce, count * element_size, 0, 0);
  for (size_t first = 0; first < count; first += per_round) {
    const size_t n = std::min(per_round, count - first);
    char* chunk = data + first * element_size;
    const uint32_t round = ++round_;
    std::memcpy(input(rank_), chunk, n * element_size);
    raise_and_wait_for_everyone(Stage::arrived, round, deadline);
    const auto slice_begin = [&](int r) { return n * static_cast<size_t>(r) / static_cast<size_t>(size_); };
    const size_t begin = slice_begin(rank_), length = slice_begin(rank_ + 1) - begin;
    if (length > 0) {
      const size_t offset = begin * element_size;
      char* out = output(rank_, round) + offset;
      reduce(out, input(0) + offset, input(1) + offset, length);
      for (int r = 2; r < size_; ++r) reduce(out, out, input(r) + offset, length);
      if (finish) finish(out, length);
    }
    raise_counter(header(rank_).reduced, round);
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) wait_for(r, Stage::reduced, round, deadline);
      const size_t offset = slice_begin(r) * element_size;
      std::memcpy(chunk + offset, output(r, round) + offset, (slice_begin(r + 1) - slice_begin(r)) * element_size);
    }
  }
}

void SharedMemoryAllReduce::all_reduce_in_place(const SharedBuffer& buffer, size_t offset, size_t count,
                                                size_t element_size, const ReduceFunction& reduce,
                                                const FinishFunction& finish,
                                                std::chrono::steady_clock::time_point deadline) {
  const auto data_of = [&](int r) { return buffer.parts[static_cast<size_t>(r)] + offset; };
  const auto slice_begin = [&](int r) { return count * static_cast<size_t>(r) / static_cast<size_t>(size_); };
  const uint32_t round = ++round_;
  announce_call(Call::all_reduce, count * element_size, buffer.id, offset);
  raise_and_wait_for_everyone(Stage::arrived, round, deadline);
  // Our slice, a block at a time through the scratch area: our own data is one of the operands,
  // so the sum may overwrite it only once every rank's part of the block is added.
  constexpr size_t kScratchBytes = size_t{64} << 10;
  scratch_.resize(kScratchBytes);
  const size_t per_block = kScratchBytes / element_size, slice_end = slice_begin(rank_ + 1);
  for (size_t first = slice_begin(rank_); first < slice_end; first += per_block) {
    const size_t n = std::min(per_block, slice_end - first), at = first * element_size;
    reduce(scratch_.data(), data_of(0) + at, data_of(1) + at, n);
    for (int r = 2; r < size_; ++r) reduce(scratch_.data(), scratch_.data(), data_of(r) + at, n);
    if (finish) finish(scratch_.data(), n);
    for (int r = 0; r < size_; ++r) std::memcpy(data_of(r) + at, scratch_.data(), n * element_size);
  }
  raise_and_wait_for_everyone(Stage::reduced, round, deadline);
  bytes_reduced_in_place_ += count * element_size;
}

// Each round the root copies a chunk into its input area and raises both its counters; the others
// copy it out and raise theirs. The root goes on to the next round only when every rank has
// (its input area is then free again), which keeps the reuse rules of all_reduce's rounds.
void SharedMemoryAllReduce::broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  announce_call(Call::broadcast, bytes, 0, 0);
  for (size_t first = 0; first < bytes; first += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - first);
    char* chunk = static_cast<char*>(data) + first;
    const uint32_t round = ++round_;
    if (rank_ == root) std::memcpy(input(root), chunk, n);
    else {
      wait_for(root, Stage::arrived, round, deadline);
      check_same_call(root);
      std::memcpy(chunk, input(root), n);
    }
    raise_counter(header(rank_).arrived, round);
    raise_counter(header(rank_).reduced, round);
    if (rank_ == root)
      for (int r = 0; r < size_; ++r)
        if (r != root) wait_for(r, Stage::reduced, round, deadline);
  }
}

void SharedMemoryAllReduce::round_through_inputs(const std::function<void()>& fill, const std::function<void()>& use,
                                                 std::chrono::steady_clock::time_point deadline) {
  const uint32_t round = ++round_;
  fill();
  raise_and_wait_for_everyone(Stage::arrived, round, deadline);
  use();
  raise_and_wait_for_everyone(Stage::reduced, round, deadline);
}

// Each round carries the same stretch of every chunk: the input area holds size() pieces, the
// one for rank d at slot d, and rank r reduces slot r of every rank's area into its output.
void SharedMemoryAllReduce::reduce_scatter(const void* input, void* output, size_t count, size_t element_size,
                                           const ReduceFunction& reduce, std::chrono::milliseconds timeout,
                                           const FinishFunction& finish) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto* in = static_cast<const char*>(input);
  const size_t per_round = kChunkBytes / element_size / static_cast<size_t>(size_);
  announce_call(Call::reduce_scatter, count * element_size * static_cast<size_t>(size_), 0, 0);
  for (size_t first = 0; first < count; first += per_round) {
    const size_t n = std::min(per_round, count - first), piece = n * element_size;
    char* out = static_cast<char*>(output) + first * element_size;
    const size_t slot = static_cast<size_t>(rank_) * piece;
    const auto fill = [&] {
      for (size_t d = 0; d < static_cast<size_t>(size_); ++d)
        std::memcpy(this->input(rank_) + d * piece, in + (d * count + first) * element_size, piece);
    };
    const auto use = [&] {
      reduce(out, this->input(0) + slot, this->input(1) + slot, n);
      for (int r = 2; r < size_; ++r) reduce(out, out, this->input(r) + slot, n);
      if (finish) finish(out, n);
    };
    round_through_inputs(fill, use, deadline);
  }
}

void SharedMemoryAllReduce::all_gather(const void* input, void* output, size_t bytes,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  announce_call(Call::all_gather, bytes, 0, 0);
  for (size_t first = 0; first < bytes; first += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - first);
    const auto fill = [&] { std::memcpy(this->input(rank_), static_cast<const char*>(input) + first, n); };
    const auto use = [&] {
      for (int r = 0; r < size_; ++r)
        std::memcpy(static_cast<char*>(output) + static_cast<size_t>(r) * bytes + first, this->input(r), n);
    };
    round_through_inputs(fill, use, deadline);
  }
}

}  // namespace sg::dist
