#include "collective_expectations.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "core/cuda_runtime/runtime.h"

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

namespace {
Tensor rank_tensor(int rank, int64_t n, DType dtype, Device device) {
  return tensor(rank_values(rank, n, dtype)).to(dtype).to(device);
}

// |got - expected| <= tolerance element by element, after copying `t` to the host; false when
// `t` is not on `device` (a collective must leave its result where its tensor was).
bool equal_to(Device device, const Tensor& t, const std::vector<double>& expected, double tolerance = 0) {
  if (t.device() != device) return false;
  const Tensor values = t.to(Device::cpu()).to(DType::f64).contiguous();
  if (values.numel() != static_cast<int64_t>(expected.size())) return false;
  const double* v = values.data_ptr<double>();
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::abs(v[i] - expected[i]) > tolerance) return false;
  return true;
}
}  // namespace

void check_every_collective(dist::ProcessGroup& group, Device device,
                            const std::function<double(DType)>& avg_tolerance) {
  const int rank = group.rank(), world = group.size();
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                          DType::i64, DType::i32, DType::u8,  DType::boolean};
  const dist::ReduceOp ops[] = {dist::ReduceOp::SUM, dist::ReduceOp::AVG, dist::ReduceOp::PRODUCT, dist::ReduceOp::MIN,
                                dist::ReduceOp::MAX};
  const int last = world - 1;
  for (DType dtype : dtypes)
    // 0 elements, one, a few, and a large count that no world size of 2..7 divides.
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{300007}}) {
      const std::string where = std::string(dtype_name(dtype)) + "[" + std::to_string(n) + "]";
      for (dist::ReduceOp op : ops) {
        if (dtype == DType::boolean && op == dist::ReduceOp::AVG) continue;
        if (op == dist::ReduceOp::PRODUCT && dtype == DType::u8 && world > 2) continue;  // 5^3 overflows u8
        const double tolerance = op == dist::ReduceOp::AVG ? avg_tolerance(dtype) : 0;
        Tensor t = rank_tensor(rank, n, dtype, device);
        group.all_reduce(t, op)->wait();
        expect(equal_to(device, t, expected_reduction(op, dtype, n, world), tolerance),
               std::string("all_reduce(") + dist::reduce_op_name(op) + ") of " + where);
        Tensor r = rank_tensor(rank, n, dtype, device);
        group.reduce(r, last, op)->wait();
        if (rank == last)
          expect(equal_to(device, r, expected_reduction(op, dtype, n, world), tolerance),
                 std::string("reduce(") + dist::reduce_op_name(op) + ") of " + where);
        // Chunk `rank` of the reduction of world * n elements.
        Tensor chunk = empty({n}, {dtype, device});
        group.reduce_scatter_tensor(chunk, rank_tensor(rank, world * n, dtype, device), op)->wait();
        const std::vector<double> whole = expected_reduction(op, dtype, world * n, world);
        expect(equal_to(device, chunk, std::vector<double>(whole.begin() + rank * n, whole.begin() + (rank + 1) * n),
                        tolerance),
               std::string("reduce_scatter_tensor(") + dist::reduce_op_name(op) + ") of " + where + " per rank");
      }
      for (int root = 0; root < world; ++root) {
        Tensor b = rank_tensor(rank, n, dtype, device);
        group.broadcast(b, root)->wait();
        expect(equal_to(device, b, rank_values(root, n, dtype)),
               "broadcast from " + std::to_string(root) + " of " + where);
      }
      std::vector<Tensor> gathered;
      for (int r = 0; r < world; ++r) gathered.push_back(empty({n}, {dtype, device}));
      group.all_gather(gathered, rank_tensor(rank, n, dtype, device))->wait();
      for (int r = 0; r < world; ++r)
        expect(equal_to(device, gathered[r], rank_values(r, n, dtype)), "all_gather of " + where);
      Tensor flat = empty({world * n}, {dtype, device});
      group.all_gather_into_tensor(flat, rank_tensor(rank, n, dtype, device))->wait();
      std::vector<double> every_rank;
      for (int r = 0; r < world; ++r) {
        const std::vector<double> values = rank_values(r, n, dtype);
        every_rank.insert(every_rank.end(), values.begin(), values.end());
      }
      expect(equal_to(device, flat, every_rank), "all_gather_into_tensor of " + where);
      std::vector<Tensor> at_root;
      if (rank == last)
        for (int r = 0; r < world; ++r) at_root.push_back(empty({n}, {dtype, device}));
      group.gather(at_root, rank_tensor(rank, n, dtype, device), last)->wait();
      for (size_t r = 0; r < at_root.size(); ++r)
        expect(equal_to(device, at_root[r], rank_values(static_cast<int>(r), n, dtype)), "gather of " + where);
      std::vector<Tensor> pieces;
      if (rank == 0)
        for (int r = 0; r < world; ++r) pieces.push_back(rank_tensor(r + 10, n, dtype, device));
      Tensor piece = empty({n}, {dtype, device});
      group.scatter(piece, pieces, 0)->wait();
      expect(equal_to(device, piece, rank_values(rank + 10, n, dtype)), "scatter of " + where);
    }
  group.barrier()->wait();

  // Counts over several rounds of the shared-memory all-reduce (4 MB each, dist/shm_all_reduce.h),
  // the last one short and split unevenly among the ranks.
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::u8}) {
    const int64_t n = 2'500'007;
    for (dist::ReduceOp op : {dist::ReduceOp::SUM, dist::ReduceOp::MAX}) {
      Tensor t = rank_tensor(rank, n, dtype, device);
      group.all_reduce(t, op)->wait();
      expect(equal_to(device, t, expected_reduction(op, dtype, n, world)),
             std::string("all_reduce(") + dist::reduce_op_name(op) + ") of " + dtype_name(dtype) + "[" +
                 std::to_string(n) + "]");
    }
  }

  // Asynchronous: issue several, wait in reverse order; they still ran in issue order, and after
  // wait() the compute stream sees each result.
  std::vector<Tensor> tensors;
  std::vector<dist::WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    tensors.push_back(full({1000}, rank + k, {DType::f32}).to(device));
    works.push_back(group.all_reduce(tensors.back()));
  }
  for (int k = 3; k >= 0; --k) {
    works[static_cast<size_t>(k)]->wait();
    const double sum = world * (world - 1) / 2.0 + world * k;
    expect(equal_to(device, tensors[static_cast<size_t>(k)], std::vector<double>(1000, sum)),
           "async all_reduce " + std::to_string(k));
  }
  // Gloo's collectives are complete after wait(); NCCL's once the GPU has passed them.
  if (device.is_cuda()) cuda::synchronize();
  for (const auto& work : works) expect(work->is_completed(), "is_completed after wait (and the GPU finished)");

  // broadcast_coalesced packs mixed dtypes (and a non-contiguous view) into one byte buffer.
  Tensor weights = (rank_tensor(rank, 12, DType::f32, device)).view({3, 4});
  Tensor counts = rank_tensor(rank, 5, DType::i64, device);
  Tensor halves = rank_tensor(rank, 3, DType::f16, device);
  dist::broadcast_coalesced(group, {weights.t(), counts, halves}, 0);
  expect(equal_to(device, weights.view({12}), rank_values(0, 12, DType::f32)),
         "broadcast_coalesced f32 (transposed view)");
  expect(equal_to(device, counts, rank_values(0, 5, DType::i64)), "broadcast_coalesced i64");
  expect(equal_to(device, halves, rank_values(0, 3, DType::f16)), "broadcast_coalesced f16");
}

}  // namespace sg::test::collectives
