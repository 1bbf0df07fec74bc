#pragma once
// defines: dist::hash_bytes, dist::hash_bits, dist::check_replicas_agree — DDP's replica-drift
//          guard: a 64-bit hash of every parameter, buffer and optimizer-state tensor, compared
//          across the ranks, and an error naming the first tensor whose replicas differ.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace sg::dist {

// Note [Replicas stay identical]
// DDP keeps the replicas equal only indirectly: they start from rank 0's weights, every rank
// averages the same gradients, and the optimizer is assumed to do the same arithmetic everywhere.
// Nothing notices when a program breaks that: a parameter whose gradient DDP never averages (one
// unfrozen after DDP was built, on some ranks only), an optimizer step taken after a no_sync
// backward on one rank, BatchNorm statistics kept per rank (broadcast_buffers = false). The
// replicas then drift apart silently, and the checkpoint rank 0 writes is one of several
// different models. PyTorch compares the replicas only when DDP is built.
//
// With DDPOptions::check_replicas_every = K, DDP compares them across the ranks every K
// synchronised steps, and DistributedDataParallel::check_replicas does at a snapshot (the
// Accelerator's save_state, with the optimizer's state). A check hashes each tensor's bits
// (hash_bits), folds the hashes of each of the reducer's buckets into one, and all-gathers
// those few words: one small collective. Only when some bucket differs does a second exchange
// send each tensor's hash with its name, so the error can name the first one that differs.
//
// Every rank sees the same gathered hashes and so reaches the same verdict: all of them throw
// the same sg::Error together, and none is left waiting in a collective the others never reach.
// The check itself is a collective, so every rank must make it at the same point (DDP counts
// synchronised backwards, which every rank makes together: Note [When the replicas are
// checked] in dist/ddp.cpp).

// XXH64 of `size` bytes with seed 0, from the xxHash library (Debian's libxxhash): one pass at
// memory speed, the same value on every machine of one byte order.
uint64_t hash_bytes(const void* data, size_t size);

// hash_bytes of the tensor's elements in row-major order, exactly as stored: -0.0 and 0.0
// differ, so do NaNs with different payloads, and a view hashes like a copy of it. A tensor on
// a GPU is copied to the host first.
uint64_t hash_bits(const Tensor& tensor);

// Compares the tensors of every group (a DDP bucket, the buffers, the optimizer's state) across
// the ranks of `group`; when some differ, throws on every rank an sg::Error that starts with
// `where`, names the first tensor that differs in the order given, says which rank holds which
// hash ("rank 0 holds 0x..., rank 1 differs with 0x...", "ranks 0, 2 agree on 0x..., rank 1
// differs with 0x..."), and how many other tensors differ. A collective: every rank calls it with
// as many groups. Nothing to compare, and no communication, on a group of one.
void check_replicas_agree(ProcessGroup& group, const std::vector<nn::NamedTensors>& groups, const std::string& where);

}  // namespace sg::dist
