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
// buffers, 1 instead of dozens). CPU tensors; synchronous.
void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root = 0);

// Every rank's `text`, indexed by rank. Synchronous; two collectives (lengths, then bytes).
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text);

}  // namespace sg::dist
