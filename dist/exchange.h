#pragma once
// defines: broadcast_coalesced, all_gather_strings — collectives over things that are not a
//          single tensor, built from the ProcessGroup's tensor collectives.
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"

namespace sg::dist {

// Copies every tensor of `root` into the same tensor of every rank. All of them travel packed in
// one flat byte buffer: one collective instead of one per tensor (for a model's BatchNorm
// buffers, 1 instead of dozens). The tensors live on the group's device; synchronous.
void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root = 0);

// The same broadcast, started now and finished later: the constructor packs root's tensors and
// hands the bytes to the communication thread; finish() waits and copies them into the tensors
// of the other ranks. Until then those tensors must not be read or written. DDP uses it to let
// the buffer broadcast travel during backward (Note [Buffers travel during backward]).
class CoalescedBroadcast {
public:
  CoalescedBroadcast() = default;  // nothing in flight
  CoalescedBroadcast(ProcessGroup& group, TensorList tensors, int root = 0);
  CoalescedBroadcast(CoalescedBroadcast&&) = default;
  CoalescedBroadcast& operator=(CoalescedBroadcast&& other);
  ~CoalescedBroadcast();  // waits (the bytes must outlive the collective), never throws

  void finish();  // no-op when nothing is in flight; rethrows the collective's error

private:
  void wait_quietly() noexcept;

  TensorList tensors_;
  Tensor flat_;  // the packed bytes the collective reads (root) or writes (the others)
  WorkPtr work_;
  bool is_root_ = false;
};

// Every rank's `text`, indexed by rank. Synchronous; two collectives (lengths, then bytes).
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text);

}  // namespace sg::dist
