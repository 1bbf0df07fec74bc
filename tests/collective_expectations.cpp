#include "collective_expectations.h"

#include <algorithm>
#include <cmath>
#include <iostream>

namespace sg::test::collectives {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::cout << "rank " << dist::get_rank() << ": WRONG " << what << "\n";
}

// Rank r's element i: a small integer (1..5) or a parity for bool, exact in every dtype, so
// sums and products over 3 ranks are exact too.
double value(int rank, int64_t i, DType dtype) {
  if (dtype == DType::boolean) return (rank + i) % 2 == 0 ? 1.0 : 0.0;
  return static_cast<double>(((rank + 1) * (i % 7 + 1)) % 5 + 1);
}

std::vector<double> rank_values(int rank, int64_t n, DType dtype) {
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = value(rank, i, dtype);
  return values;
}

namespace {
double combine(dist::ReduceOp op, DType dtype, double a, double b) {
  if (dtype == DType::boolean) return (op == dist::ReduceOp::SUM || op == dist::ReduceOp::MAX) ? (a || b) : (a && b);
  switch (op) {
    case dist::ReduceOp::SUM:
    case dist::ReduceOp::AVG: return a + b;
    case dist::ReduceOp::PRODUCT: return a * b;
    case dist::ReduceOp::MIN: return std::min(a, b);
    case dist::ReduceOp::MAX: return std::max(a, b);
  }
  return 0;
}
}  // namespace

std::vector<double> expected_reduction(dist::ReduceOp op, DType dtype, int64_t n, int world) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double acc = value(0, i, dtype);
    for (int r = 1; r < world; ++r) acc = combine(op, dtype, acc, value(r, i, dtype));
    if (op == dist::ReduceOp::AVG) acc = is_floating(dtype) ? acc / world : std::trunc(acc / world);
    out[static_cast<size_t>(i)] = acc;
  }
  return out;
}

}  // namespace sg::test::collectives
