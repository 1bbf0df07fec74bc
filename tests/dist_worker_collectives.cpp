// One rank of tests/test_dist_collectives.cpp. Usage: dist_worker_collectives <scenario>
// Exit codes: 0 all checks passed, 1 a result was wrong (printed), 3 an sg::Error (printed).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "collective_expectations.h"
#include "syncgrad.h"

using namespace sg;
using namespace sg::test::collectives;

namespace {

Tensor rank_tensor(int rank, int64_t n, DType dtype) { return tensor(rank_values(rank, n, dtype)).to(dtype); }

bool equal_to(const Tensor& t, const std::vector<double>& expected, double tolerance = 0) {
  const Tensor values = t.to(DType::f64).contiguous();
  const double* v = values.data_ptr<double>();
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::abs(v[i] - expected[i]) > tolerance) return false;
  return true;
}

void all_collectives() {
  dist::ProcessGroup& group = dist::default_group();
  const int rank = group.rank(), world = group.size();
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8, DType::boolean};
  const dist::ReduceOp ops[] = {dist::ReduceOp::SUM, dist::ReduceOp::AVG, dist::ReduceOp::PRODUCT, dist::ReduceOp::MIN,
                                dist::ReduceOp::MAX};
  for (DType dtype : dtypes)
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{300007}}) {
      const std::string where = std::string(dtype_name(dtype)) + "[" + std::to_string(n) + "]";
      for (dist::ReduceOp op : ops) {
        if (dtype == DType::boolean && op == dist::ReduceOp::AVG) continue;
        if (op == dist::ReduceOp::PRODUCT && dtype == DType::u8 && world > 2) continue;  // 5^3 overflows u8
        // AVG's division rounds in the tensor's dtype; everything else here is exact.
        const double tolerance = op != dist::ReduceOp::AVG ? 0
                                 : dtype == DType::f16 || dtype == DType::bf16 ? 1e-2
                                 : dtype == DType::f32 ? 1e-6 : 0;
        Tensor t = rank_tensor(rank, n, dtype);
        group.all_reduce(t, op)->wait();
        expect(equal_to(t, expected_reduction(op, dtype, n, world), tolerance),
               std::string("all_reduce(") + dist::reduce_op_name(op) + ") of " + where);
        Tensor r = rank_tensor(rank, n, dtype);
        group.reduce(r, world - 1, op)->wait();
        if (rank == world - 1)
          expect(equal_to(r, expected_reduction(op, dtype, n, world), tolerance),
                 std::string("reduce(") + dist::reduce_op_name(op) + ") of " + where);
      }
      for (int root = 0; root < world; ++root) {
        Tensor b = rank_tensor(rank, n, dtype);
        group.broadcast(b, root)->wait();
        expect(equal_to(b, rank_values(root, n, dtype)), "broadcast from " + std::to_string(root) + " of " + where);
      }
      std::vector<Tensor> gathered;
      for (int r = 0; r < world; ++r) gathered.push_back(empty({n}, {dtype}));
      group.all_gather(gathered, rank_tensor(rank, n, dtype))->wait();
      for (int r = 0; r < world; ++r) expect(equal_to(gathered[r], rank_values(r, n, dtype)), "all_gather of " + where);
      std::vector<Tensor> at_root;
      if (rank == 1)
        for (int r = 0; r < world; ++r) at_root.push_back(empty({n}, {dtype}));
      group.gather(at_root, rank_tensor(rank, n, dtype), 1)->wait();
      for (size_t r = 0; r < at_root.size(); ++r)
        expect(equal_to(at_root[r], rank_values(static_cast<int>(r), n, dtype)), "gather of " + where);
      std::vector<Tensor> pieces;
      if (rank == 0)
        for (int r = 0; r < world; ++r) pieces.push_back(rank_tensor(r + 10, n, dtype));
      Tensor piece = empty({n}, {dtype});
      group.scatter(piece, pieces, 0)->wait();
      expect(equal_to(piece, rank_values(rank + 10, n, dtype)), "scatter of " + where);
    }
  group.barrier()->wait();

  // Asynchronous: issue several, wait in reverse order; they still ran in issue order.
  std::vector<Tensor> tensors;
  std::vector<dist::WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    tensors.push_back(full({1000}, rank + k, {DType::f32}));
    works.push_back(group.all_reduce(tensors.back()));
  }
  for (int k = 3; k >= 0; --k) {
    works[static_cast<size_t>(k)]->wait();
    expect(works[static_cast<size_t>(k)]->is_completed(), "is_completed after wait");
    const double sum = world * (world - 1) / 2.0 + world * k;
    expect(equal_to(tensors[static_cast<size_t>(k)], std::vector<double>(1000, sum)), "async all_reduce " + std::to_string(k));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "never_joins" && std::getenv("RANK") == std::string("1"))
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    dist::init_process_group();
    dist::ProcessGroup& group = dist::default_group();
    if (scenario == "all") {
      all_collectives();
    } else if (scenario == "dies") {
      group.barrier()->wait();
      if (group.rank() == 1) std::_Exit(9);  // gone, mid-run, without a goodbye
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "late") {
      if (group.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return 0;
      }
      Tensor t = ones({10});
      group.all_reduce(t)->wait();
    } else if (scenario == "mismatch") {
      Tensor a = ones({10}), b = ones({4});
      if (group.rank() == 0) group.all_reduce(a)->wait();
      else group.broadcast(b, 0)->wait();
    } else if (scenario == "never_joins") {
      // rank 0 gives up waiting for rank 1 at init
    } else {
      std::cout << "unknown scenario " << scenario << "\n";
      return 2;
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cout << "rank " << dist::get_rank() << ": " << e.what() << "\n";
    return 3;
  }
  return failures == 0 ? 0 : 1;
}
