#pragma once
// defines: dist::SharedMemoryAllReduce — all-reduce through shared memory for a group whose ranks
//          all run on one machine; ProcessGroupGloo uses it for all_reduce when every rank could
//          join it (Note [A shared-memory all-reduce beside Gloo] in dist/shm_all_reduce.cpp).
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sg::dist {

class TcpStore;

// Which machine this process runs on, as shared memory sees it: one kernel (its boot id), one pid
// namespace (a peer's pid must mean the same process) and one network namespace (where "machines"
// of a test are namespaces, scripts/multinode-test.sh), then SG_MACHINE_LABEL when it is set.
std::string machine_identity();

class SharedMemoryAllReduce {
public:
  // c[i] = a[i] (op) b[i] over n elements (ProcessGroupGloo's reduce functions).
  using ReduceFunction = std::function<void(void* c, const void* a, const void* b, size_t n)>;

  // Why connect() gave no all-reduce, the same on every rank. A failure (no memory to reserve, a
  // segment the kernel will not let a peer open) is worth telling the user; a choice
  // (SG_SHM_ALLREDUCE=0) or a group that spans machines is not.
  struct Unavailable {
    std::string reason;
    bool is_failure = false;
  };

  // Collective: every rank of the group (size >= 2) calls it, at the same point of the group's
  // setup through `store`. Each rank maps a segment of its own and the others' (anonymous memory,
  // which no way of ending a process can leak: Note [Segments with no name] in
  // dist/shm_all_reduce.cpp), and all of them agree through the store whether every rank could:
  // nullptr (with `why_not` filled in) when one could not or `enabled` is false on some rank; the
  // group then uses Gloo.
  //
  // A subset of a process group (one machine's ranks, for dist/hierarchical_all_reduce.h) connects
  // under its own `key_prefix` and passes `group_ranks`, each member's rank in the process group,
  // which the errors then name; by default member r is rank r.
  static std::unique_ptr<SharedMemoryAllReduce> connect(TcpStore& store, int rank, int size, bool enabled,
                                                        Unavailable& why_not, const std::string& key_prefix = "shm/",
                                                        std::vector<int> group_ranks = {});
  ~SharedMemoryAllReduce();
  SharedMemoryAllReduce(const SharedMemoryAllReduce&) = delete;
  SharedMemoryAllReduce& operator=(const SharedMemoryAllReduce&) = delete;

  // Applied to each slice of the result by the one rank that reduced it, before the others copy
  // it: AVG's division by the group size, done once per element instead of by every rank over
  // the whole tensor.
  using FinishFunction = std::function<void(void* data, size_t n)>;

  // Reduces `count` elements of `element_size` bytes at `data` across the ranks, in place; every
  // rank gets the same bits. When `data` lies in a buffer of allocate_shared(), at the same offset
  // on every rank, the ranks read each other's data where it lies (Note [Buckets in shared
  // memory]); otherwise it travels through the segments in rounds. Throws std::runtime_error
  // naming the rank when a peer exits or does not arrive within `timeout`; the object is
  // unusable after that.
  void all_reduce(void* data, size_t count, size_t element_size, const ReduceFunction& reduce,
                  std::chrono::milliseconds timeout, const FinishFunction& finish = {});

  // Collective: `bytes` of zeroed memory on every rank, which every other rank maps too, so that
  // all_reduce can reduce a tensor lying in it without copying it through the segments (DDP's
  // gradient buckets, through ProcessGroup::zeros_for_all_reduce). Every rank asks for the same
  // size, in the same order. The memory lives while the returned pointer (to this rank's part)
  // or a copy of it does. nullptr on every rank, with `why_not` set, when a rank could not.
  std::shared_ptr<char> allocate_shared(TcpStore& store, size_t bytes, std::string& why_not);
  // The bytes this rank has all-reduced where they lie, in buffers of allocate_shared.
  uint64_t bytes_reduced_in_place() const { return bytes_reduced_in_place_; }

  // Copies `bytes` at `data` of member `root` into `data` of every other member, in the same
  // rounds as all_reduce (the last stage of the hierarchical all-reduce); errors as all_reduce's.
  void broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout);

  // ProcessGroup::reduce_scatter_tensor: `input` holds size() chunks of `count` elements, and this
  // rank's `output` gets the reduction over the ranks of chunk `rank`, each element reduced once
  // (then finished, as all_reduce's) by the rank that keeps it; errors as all_reduce's.
  void reduce_scatter(const void* input, void* output, size_t count, size_t element_size, const ReduceFunction& reduce,
                      std::chrono::milliseconds timeout, const FinishFunction& finish = {});
  // ProcessGroup::all_gather_into_tensor: chunk r of `output` (size() chunks of `bytes`) gets
  // rank r's `bytes` at `input`; errors as all_reduce's.
  void all_gather(const void* input, void* output, size_t bytes, std::chrono::milliseconds timeout);

  // Collective #sequence of the group starts on this rank; started(r): the last one member r
  // started, -1 before any (Note [Marks in the segments]).
  void mark_started(int64_t sequence);
  int64_t started(int r) const;

  // The bytes each rank's segment carries per round (the chunk size).
  static constexpr size_t kChunkBytes = size_t{4} << 20;

  // The collectives, as a rank's header names the one it is in.
  enum class Call : uint32_t { all_reduce, broadcast, reduce_scatter, all_gather };

private:
  struct Header;
  struct SharedBuffer;
  enum class Stage { arrived, reduced };  // the counters of a rank's header, in a call's order
  SharedMemoryAllReduce(int rank, int size, std::vector<int> group_ranks)
      : rank_(rank),
        size_(size),
        group_ranks_(std::move(group_ranks)) {}
  Header& header(int r) const;
  char* input(int r) const;
  char* output(int r, uint32_t round) const;
  std::atomic<uint32_t>& counter_of(int r, Stage stage) const;
  // Raises our counter of `stage` to `round`, then waits until every other rank's reaches it;
  // once they have arrived, checks that they make the same call as we do.
  void raise_and_wait_for_everyone(Stage stage, uint32_t round, std::chrono::steady_clock::time_point deadline);
  // Waits until rank r's counter of `stage` reaches `round`.
  void wait_for(int r, Stage stage, uint32_t round, std::chrono::steady_clock::time_point deadline) const;
  // Says in our header which collective this call is, its bytes, and where it lies when in a
  // shared buffer.
  void announce_call(Call kind, uint64_t bytes, uint64_t buffer, uint64_t offset);
  // Throws unless member r's call is the same as ours.
  void check_same_call(int r) const;
  // The live shared buffer holding [data, data + bytes) on this rank, or null.
  std::shared_ptr<SharedBuffer> buffer_holding(const void* data, size_t bytes);
  void all_reduce_through_segments(char* data, size_t count, size_t element_size, const ReduceFunction& reduce,
                                   const FinishFunction& finish, std::chrono::steady_clock::time_point deadline);
  // One round of reduce_scatter or all_gather: `fill` writes our input area, every rank arrives,
  // `use` reads everyone's, and every rank has used them before anybody's is written again.
  void round_through_inputs(const std::function<void()>& fill, const std::function<void()>& use,
                            std::chrono::steady_clock::time_point deadline);
  void all_reduce_in_place(const SharedBuffer& buffer, size_t offset, size_t count, size_t element_size,
                           const ReduceFunction& reduce, const FinishFunction& finish,
                           std::chrono::steady_clock::time_point deadline);
  int group_rank(int r) const { return group_ranks_[static_cast<size_t>(r)]; }

  int rank_, size_;
  std::vector<int> group_ranks_;  // each member's rank in the process group, for the errors
  std::vector<void*> segments_;   // every rank's segment, mapped here; ours is segments_[rank_]
  std::vector<pid_t> pids_;
  uint32_t round_ = 0;  // rounds (chunks) done, the same count on every rank
  std::string key_prefix_;
  std::mutex buffers_mutex_;  // allocate_shared runs on the caller's thread, all_reduce on the group's
  std::vector<std::weak_ptr<SharedBuffer>> buffers_;  // those allocated, alive or not
  uint64_t buffers_allocated_ = 0;                    // the same count on every rank: each buffer's id
  std::vector<char> scratch_;                         // one block of a slice being reduced in place
  std::atomic<uint64_t> bytes_reduced_in_place_{0};
};

}  // namespace sg::dist
