#pragma once
// defines: dist::HierarchicalAllReduce — all_reduce of a group that spans machines, in three stages:
//          shared memory inside each machine, Gloo between one leader per machine, shared memory
//          back (Note [A hierarchical all-reduce across machines] in dist/hierarchical_all_reduce.cpp).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "dist/shm_all_reduce.h"

namespace gloo {
class Context;
}

namespace sg::dist {

class TcpStore;

class HierarchicalAllReduce {
public:
  // Makes a Gloo context of `size` ranks (this one `rank`) whose rendezvous keys start with
  // `key_prefix`: ProcessGroupGloo's own way of connecting, handed in so that this file needs
  // none of Gloo's transport.
  using ConnectGloo = std::function<std::shared_ptr<gloo::Context>(const std::string& key_prefix, int rank, int size)>;
  // Gloo's all-reduce of the tensor among the leaders, within `timeout`.
  using AllReduceAmongLeaders =
      std::function<void(const std::shared_ptr<gloo::Context>& leaders, std::chrono::milliseconds timeout)>;

  // Collective over the whole group, after SharedMemoryAllReduce::connect found it spans machines.
  // Every rank says which machine it is on (machine_identity()); when some machine has two ranks or
  // more and no rank has it turned off (`enabled`), each machine's ranks map a shared-memory
  // all-reduce among themselves and the lowest rank of each machine, its leader, connects to the
  // other leaders through `connect_gloo`. nullptr, with `why_not` filled in as
  // SharedMemoryAllReduce::connect does, when the group keeps Gloo's flat all-reduce.
  static std::unique_ptr<HierarchicalAllReduce> connect(TcpStore& store, int rank, int size, bool enabled,
                                                        const ConnectGloo& connect_gloo,
                                                        SharedMemoryAllReduce::Unavailable& why_not);

  // Reduces `count` elements of `element_size` bytes at `data` across the group, in place: every
  // rank gets the same bits. `reduce` combines two arrays (SharedMemoryAllReduce::ReduceFunction);
  // `among_leaders` runs the Gloo stage on leaders only. Throws std::runtime_error naming the rank
  // when a peer on this machine fails, and Gloo's error when a leader does.
  void all_reduce(void* data, size_t count, size_t element_size, const SharedMemoryAllReduce::ReduceFunction& reduce,
                  const AllReduceAmongLeaders& among_leaders, std::chrono::milliseconds timeout);

  bool is_leader() const { return leaders_ != nullptr; }
  int machines() const { return machines_; }

private:
  HierarchicalAllReduce() = default;

  int machines_ = 0;
  // This machine's ranks' shared-memory all-reduce; null when this rank is alone on its machine.
  std::unique_ptr<SharedMemoryAllReduce> machine_;
  // The leaders' Gloo context; null on the other ranks.
  std::shared_ptr<gloo::Context> leaders_;
};

}  // namespace sg::dist
