#pragma once
// defines: what the collective workers (tests/dist_worker_collectives.cpp for Gloo,
//          tests/nccl_worker.cpp for NCCL) put into each rank's tensor and expect back, and
//          expect(), which counts and prints a wrong result.
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

}  // namespace sg::test::collectives
