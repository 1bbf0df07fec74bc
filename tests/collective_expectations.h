#pragma once
// defines: check_every_collective and what it puts into each rank's tensor and expects back —
//          the collective checks that the Gloo worker (tests/dist_worker_collectives.cpp) runs on
//          CPU tensors and the NCCL worker (tests/nccl_worker.cpp) on GPU tensors; expect(),
//          which counts and prints a wrong result.
#include <functional>
#include <string>
#include <vector>

#include "syncgrad.h"

namespace sg::test::collectives {

// Wrong results seen so far by expect(); a worker exits 1 when there are any.
extern int failures;
void expect(bool ok, const std::string& what);

// Rank r's element i: a small integer (1..5) or a parity for bool, exact in every dtype, so
// sums and products over a few ranks are exact too.
double value(int rank, int64_t i, DType dtype);
std::vector<double> rank_values(int rank, int64_t n, DType dtype);

// Element i of the reduction of every rank's values with `op` (bool: SUM/MAX are "or",
// PRODUCT/MIN "and"; integer AVG truncates), as the backends compute it.
std::vector<double> expected_reduction(dist::ReduceOp op, DType dtype, int64_t n, int world);

// Every collective (the flat reduce_scatter_tensor and all_gather_into_tensor too) with every
// reduce op, on every dtype and 0, 1, 7 and 300007 elements (a count no world size of 2..7
// divides), then asynchronous all-reduces waited in reverse order and a broadcast_coalesced of
// mixed dtypes; tensors on `device`. `avg_tolerance(dtype)` is how far an AVG may be from the
// exact mean (each backend rounds its division its own way).
void check_every_collective(dist::ProcessGroup& group, Device device,
                            const std::function<double(DType)>& avg_tolerance);

}  // namespace sg::test::collectives
