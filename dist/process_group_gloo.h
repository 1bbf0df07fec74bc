#pragma once
// defines: dist::ProcessGroupGloo — the ProcessGroup of CPU tensors, on Gloo's TCP transport.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/collective_report.h"
#include "dist/process_group.h"

namespace gloo {
class Context;
}

namespace sg::dist {

class HierarchicalAllReduce;
class SharedMemoryAllReduce;
class TcpStore;

// Note [One communication thread per group]
// Gloo's collectives block their caller. So that DDP can start a bucket's all-reduce and go on
// with backward, every collective is queued to one communication thread, which runs them in
// issue order — the order every rank must agree on. Each collective gets the next sequence
// number; before running it the thread records "rank r started #n" in the store, so that when
// a collective fails or times out, the error can say which ranks never got there. With
// SG_DIST_DEBUG=1 the ranks also exchange a fingerprint of each collective (op, dtype, shape,
// root, number) first and all fail, showing both sides, when they disagree.
class ProcessGroupGloo final : public ProcessGroup {
public:
  // Connects every pair of ranks through Gloo (rendezvous through `store`), waiting at most
  // `timeout`, and, when they all run on this machine, maps their shared-memory all-reduce
  // (unless SG_SHM_ALLREDUCE=0), or when they span machines, sets up the hierarchical one
  // (unless SG_HIERARCHICAL_ALLREDUCE=0 or SG_SHM_ALLREDUCE=0); `debug` turns on the fingerprint check (SG_DIST_DEBUG=1
  // sets it by default).
  ProcessGroupGloo(std::shared_ptr<TcpStore> store, int rank, int size, std::chrono::milliseconds timeout, bool debug);
  ~ProcessGroupGloo() override;

  // How all_reduce travels in this group, the same on every rank (docs/distributed.md):
  // shared_memory when every rank is on one machine, hierarchical when the group spans machines
  // and some have several ranks, gloo (Gloo's flat ring) otherwise or when turned off.
  enum class AllReducePath { gloo, shared_memory, hierarchical };
  AllReducePath all_reduce_path() const;
  // The bytes of tensor data this rank has all-reduced through Gloo's TCP (its ring sends about
  // twice that over the network): all of every all_reduce on the gloo path, only the leaders' on
  // the hierarchical one, none on shared memory.
  uint64_t all_reduce_bytes_through_gloo() const { return all_reduce_bytes_through_gloo_; }
  // The bytes of tensor data this rank has all-reduced where they lie, in tensors of
  // zeros_for_all_reduce (Note [Buckets in shared memory] in dist/shm_all_reduce.cpp).
  uint64_t all_reduce_bytes_in_place() const;

  std::string backend_name() const override { return "gloo"; }
  std::string type_name() const override { return "ProcessGroupGloo"; }
  Device device() const override { return Device::cpu(); }
  void set_timeout(std::chrono::milliseconds timeout) override;
  // In shared memory when all_reduce goes through it (plain zeros where a rank cannot map it,
  // which rank 0 reports once); all_reduce then reduces the tensor, and views of it, in place.
  Tensor zeros_for_all_reduce(int64_t numel, DType dtype) override;

private:
  WorkPtr start_all_reduce(Tensor& tensor, ReduceOp op) override;
  WorkPtr start_broadcast(Tensor& tensor, int root) override;
  WorkPtr start_reduce(Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr start_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override;
  WorkPtr start_gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  WorkPtr start_scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override;
  WorkPtr start_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr start_all_gather_into_tensor(Tensor& output, const Tensor& input) override;
  WorkPtr start_barrier() override;
  void all_reduce_now(const Tensor& t, ReduceOp op, uint32_t tag, std::chrono::milliseconds timeout);
  // A barrier under a collective's tag: what a collective of zero bytes does (Note [A collective of
  // nothing still waits]).
  void barrier_now(uint32_t tag, std::chrono::milliseconds timeout);

  using Description = CollectiveDescription;
  class GlooWork;
  // Queues `run` as collective number next_sequence_++ and returns its Work; `run` gets the Gloo
  // tag to use (unique among the collectives in flight).
  WorkPtr enqueue(Description description, std::function<void(uint32_t tag)> run);
  void communication_loop();
  void run_one(GlooWork& work, int64_t sequence, const Description& description,
               const std::function<void(uint32_t tag)>& run);
  void check_fingerprints(int64_t sequence, const Description& description);
  // Where diagnose_failure reads the other ranks' marks: the shared-memory segments when the
  // group has them, else (empty) the store.
  std::function<int64_t(int)> started_reader() const;
  static uint32_t tag_of(int64_t sequence) { return static_cast<uint32_t>(sequence & 0x7fffffff); }

  std::shared_ptr<TcpStore> store_;
  std::shared_ptr<gloo::Context> context_;
  // all_reduce's path when every rank is on this machine (dist/shm_all_reduce.h); null otherwise.
  std::unique_ptr<SharedMemoryAllReduce> shared_memory_;
  // all_reduce's path when the group spans machines (dist/hierarchical_all_reduce.h); null otherwise.
  std::unique_ptr<HierarchicalAllReduce> hierarchical_;
  std::atomic<uint64_t> all_reduce_bytes_through_gloo_{0};
  // Atomic: set_timeout() may run on the caller's thread while a collective on the communication
  // thread reads it.
  std::atomic<std::chrono::milliseconds> timeout_;
  bool debug_;
  int64_t next_sequence_ = 0;  // issued on the caller's thread

  struct Job {
    std::shared_ptr<GlooWork> work;
    int64_t sequence;
    Description description;
    std::function<void(uint32_t tag)> run;
  };
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::string broken_;  // the first failure; the Gloo context is unusable after it
  std::thread communication_thread_;
};

}  // namespace sg::dist
