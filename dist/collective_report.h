#pragma once
// defines: CollectiveDescription (what a collective is, for error messages and SG_DIST_DEBUG
//          fingerprints), mark_started and diagnose_failure (after a collective failed: which
//          ranks never reached it, which exited) — shared by the Gloo and NCCL process groups.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/shape.h"

namespace sg::dist {

class TcpStore;

enum class CollectiveOp {
  all_reduce,
  broadcast,
  reduce,
  all_gather,
  gather,
  scatter,
  barrier,
  reduce_scatter_tensor,
  all_gather_into_tensor
};

struct CollectiveDescription {
  CollectiveOp op = CollectiveOp::barrier;
  int reduce_op = -1;  // a ReduceOp, or -1
  int dtype = -1;      // a DType, or -1 (barrier)
  int root = -1;
  Shape shape;
  std::string str(int64_t sequence) const;  // "all_reduce(SUM) #3 on f32[10] (40 bytes)"
  const char* op_name() const;              // "all_reduce"
  int64_t bytes() const;                    // of the tensor described; 0 for a barrier
};

// Records "rank `rank` reached collective #sequence" in the store, for diagnose_failure on the
// other ranks.
void mark_started(TcpStore& store, int rank, int64_t sequence);

// SG_DIST_DEBUG: before running collective #sequence every rank all-gathers this fixed-size
// record of it (sequence, op, reduce op, dtype, root, number of dims and up to 8 sizes) through the
// group's own transport; check_fingerprints then compares rank 0's record with every other's
// and throws the same message on every rank when they differ — instead of the mismatched
// collectives hanging or mixing unrelated bytes.
inline constexpr int kFingerprintFields = 14;
std::vector<int64_t> fingerprint(int64_t sequence, const CollectiveDescription& description);
// `all` holds every rank's fingerprint, rank by rank.
void check_fingerprints(const std::vector<int64_t>& all, int size, int64_t sequence);

// SG_DIST_DEBUG for a backend whose transport lives on the GPU (NCCL): the fingerprints travel
// through the store instead. Each rank sets its own under "<prefix>/<sequence>/<rank>" and reads
// the others' (waiting at most the store's timeout), then deletes its key of collective
// sequence - 2, which every rank has read by then, so the store holds two collectives' keys at
// most however long the run. `sequence` must count the group's collectives 0, 1, 2, ...
void check_fingerprints_through_store(TcpStore& store, const std::string& prefix, int rank, int size, int64_t sequence,
                                      const CollectiveDescription& description);

// After collective #sequence failed on `rank`: which ranks never reached it (they are late, hung,
// or took a different path), which exited, which are alive but busy elsewhere. Leaves this rank's
// "failed" mark for the others and waits up to a second for theirs. Never throws: when the store
// itself is gone, says so.
// `started_of(r)`, when given, is where rank r's last started collective is read instead of the
// store (the shared-memory segments' marks, Note [Marks in the segments] in dist/shm_all_reduce.cpp).
std::string diagnose_failure(TcpStore& store, int rank, int size, int64_t sequence,
                             const std::function<int64_t(int)>& started_of = {});

}  // namespace sg::dist
