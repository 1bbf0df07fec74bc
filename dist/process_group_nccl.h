#pragma once
// defines: make_nccl_process_group — the ProcessGroup of CUDA tensors, on NCCL. This header has
//          no CUDA include, so dist.cpp builds the group in any build; the group itself lives in
//          dist/cuda/process_group_nccl.cpp, compiled only in CUDA builds (dist.cpp calls this
//          under `if constexpr (kCudaBuild)`).
#include <chrono>
#include <memory>

#include "dist/process_group.h"

namespace sg::dist {

class TcpStore;

// Joins the NCCL communicator of ranks 0 .. size - 1 on GPU `device` (one GPU per process):
// rank 0 asks NCCL for a unique id and publishes it in `store`, the others read it there. Every
// collective fails after `timeout` (Note [NCCL streams, events and the watchdog]). With `debug`
// (SG_DIST_DEBUG), every collective first compares its fingerprint with the other ranks'.
std::unique_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<TcpStore> store, int rank, int size, int device,
                                                      std::chrono::milliseconds timeout, bool debug);

}  // namespace sg::dist
