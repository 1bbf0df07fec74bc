#include "dist/hierarchical_all_reduce.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "dist/tcp_store.h"

// Note [A hierarchical all-reduce across machines]
// A group that spans machines cannot all-reduce through one shared segment, and Gloo's flat ring
// sends every rank's share over TCP, also between two ranks of one machine and, for M machines of
// k ranks, k times over each machine's network link. NCCL does it in stages on GPUs; this is the
// CPU counterpart:
//   1. each machine's ranks all-reduce through shared memory (SharedMemoryAllReduce among them):
//      every one of them then holds the machine's sum;
//   2. one rank per machine, its leader (the machine's lowest rank), all-reduces that with the
//      other leaders through Gloo, over a context of the leaders only: one copy of the tensor
//      crosses each machine's link instead of k;
//   3. each leader broadcasts the result to its machine's other ranks through shared memory.
// Every rank ends with the same bits: Gloo's ring gives every leader the same bits (each slice is
// reduced by one rank and copied to the others), and stage 3 copies bytes. The order of the sum
// differs from the flat ring's (machine by machine), so floats may differ from Gloo's flat result
// in the last places; integers do not. AVG sums in all three stages and ProcessGroupGloo divides
// once at the end.
// A machine with one rank takes part as its own leader, without shared memory; machines may have
// unequal numbers of ranks. "One machine" is machine_identity() (dist/shm_all_reduce.h): the
// ranks say theirs through the store, so no launcher variable (LOCAL_WORLD_SIZE, Slurm's lists)
// has to be right. A stage that fails throws as the others do: a peer on this machine that exits
// or is late is named by the shared-memory wait, a leader by Gloo, and ProcessGroupGloo adds the
// report of which ranks reached the collective (dist/collective_report.h).

namespace sg::dist {

namespace {

std::string text_of(const std::vector<char>& bytes) { return std::string(bytes.begin(), bytes.end()); }
void publish(TcpStore& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<char>(value.begin(), value.end()));
}

// What each rank publishes at the two steps of connect(): on, with its machine, or off; then
// ready, or the failure that keeps its machine from shared memory.
constexpr char kOn = '1', kOff = '0', kReady = '1', kFailed = 'F';

}  // namespace

std::unique_ptr<HierarchicalAllReduce> HierarchicalAllReduce::connect(TcpStore& store, int rank, int size, bool enabled,
                                                                      const ConnectGloo& connect_gloo,
                                                                      SharedMemoryAllReduce::Unavailable& why_not) {
  // 1. Every rank's machine, and the machines in the order of their lowest rank.
  publish(store, "hier/machine/" + std::to_string(rank), enabled ? kOn + machine_identity() : std::string(1, kOff));
  std::vector<std::string> machine_of;
  for (int r = 0; r < size; ++r) {
    machine_of.push_back(text_of(store.get("hier/machine/" + std::to_string(r))));
    if (machine_of.back().empty() || machine_of.back()[0] != kOn) {
      why_not = {
          detail::concat("rank ", r, ": it is turned off there (SG_HIERARCHICAL_ALLREDUCE=0 or SG_SHM_ALLREDUCE=0)"),
          false};
      return nullptr;
    }
  }
  std::vector<std::string> machines;
  std::vector<int> here;  // the ranks of this rank's machine, ascending
  for (int r = 0; r < size; ++r) {
    if (std::find(machines.begin(), machines.end(), machine_of[r]) == machines.end()) machines.push_back(machine_of[r]);
    if (machine_of[r] == machine_of[rank]) here.push_back(r);
  }
  if (machines.size() == 1 || machines.size() == static_cast<size_t>(size)) {
    why_not = {machines.size() == 1 ? "every rank runs on one machine" : "every rank runs on a machine of its own",
               false};
    return nullptr;
  }
  const auto machine =
      static_cast<int>(std::find(machines.begin(), machines.end(), machine_of[rank]) - machines.begin());
  const auto local_rank = static_cast<int>(std::find(here.begin(), here.end(), rank) - here.begin());
  std::unique_ptr<HierarchicalAllReduce> self(new HierarchicalAllReduce);
  self->machines_ = static_cast<int>(machines.size());

  // 2. Each machine's shared memory; the group goes on only when every machine with two ranks or
  // more has it.
  std::string ready(1, kReady);
  if (here.size() >= 2) {
    SharedMemoryAllReduce::Unavailable local_why_not;
    self->machine_ = SharedMemoryAllReduce::connect(store, local_rank, static_cast<int>(here.size()), true,
                                                    local_why_not, detail::concat("hier/shm/", machine, "/"), here);
    if (!self->machine_) ready = kFailed + local_why_not.reason;
  }
  publish(store, "hier/ready/" + std::to_string(rank), ready);
  for (int r = 0; r < size; ++r) {
    const std::string theirs = text_of(store.get("hier/ready/" + std::to_string(r)));
    if (theirs.empty() || theirs[0] != kReady) {
      why_not = {theirs.empty() ? detail::concat("rank ", r, " said nothing") : theirs.substr(1), true};
      return nullptr;
    }
  }

  // 3. The leaders' own Gloo context.
  if (local_rank == 0) self->leaders_ = connect_gloo("gloo-leaders", machine, self->machines_);
  return self;
}

void HierarchicalAllReduce::all_reduce(void* data, size_t count, size_t element_size,
                                       const SharedMemoryAllReduce::ReduceFunction& reduce,
                                       const AllReduceAmongLeaders& among_leaders, std::chrono::milliseconds timeout) {
  // One deadline for the three stages, so the collective fails within the group's timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto time_left = [&] {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  };
  if (machine_) machine_->all_reduce(data, count, element_size, reduce, timeout);
  if (leaders_) among_leaders(leaders_, time_left());
  if (machine_) machine_->broadcast(data, count * element_size, /*root=*/0, time_left());
}

}  // namespace sg::dist
