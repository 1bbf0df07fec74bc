// One rank of the NCCL tests (tests/cuda/test_cuda_nccl.cpp starts one process per GPU). Usage:
//   nccl_worker <scenario> [output dir]
// Every rank joins with backend "nccl" and works on cuda:LOCAL_RANK. Exit codes: 0 all checks
// passed, 1 a result was wrong (printed), 3 an sg::Error (printed).
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "core/cuda/runtime.h"
#include "ddp_scenarios.h"
#include "collective_expectations.h"
#include "syncgrad.h"

using namespace sg;
using namespace sg::test::collectives;
namespace ddp = sg::test::ddp;

namespace {

Device gpu() { return Device::cuda(dist::get_local_rank()); }

Tensor rank_tensor(int rank, int64_t n, DType dtype) { return tensor(rank_values(rank, n, dtype)).to(dtype).to(gpu()); }

// |got - expected| <= tolerance * (|expected| + 1), after copying `t` to the host.
bool equal_to(const Tensor& t, const std::vector<double>& expected, double tolerance = 0) {
  if (t.device() != gpu()) return false;
  const Tensor values = t.to(Device::cpu()).to(DType::f64).contiguous();
  if (values.numel() != static_cast<int64_t>(expected.size())) return false;
  const double* v = values.data_ptr<double>();
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::abs(v[i] - expected[i]) > tolerance * (std::abs(expected[i]) + 1)) return false;
  return true;
}

// AVG over a world size that is not a power of two: NCCL multiplies every input by 1/size (not
// exact) and sums in the tensor's dtype, so the result is off by a few units of its last place.
double avg_tolerance(DType dtype, int world) {
  if ((world & (world - 1)) == 0) return 0;
  switch (dtype) {
    case DType::f16: return 1e-2;
    case DType::bf16: return 5e-2;
    case DType::f32: return 1e-6;
    case DType::f64: return 1e-12;
    default: return 0;
  }
}

void all_collectives() {
  dist::ProcessGroup& group = dist::default_group();
  const int rank = group.rank(), world = group.size();
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8, DType::boolean};
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
        const double tolerance = op == dist::ReduceOp::AVG ? avg_tolerance(dtype, world) : 0;
        Tensor t = rank_tensor(rank, n, dtype);
        group.all_reduce(t, op)->wait();
        expect(equal_to(t, expected_reduction(op, dtype, n, world), tolerance),
               std::string("all_reduce(") + dist::reduce_op_name(op) + ") of " + where);
        Tensor r = rank_tensor(rank, n, dtype);
        group.reduce(r, last, op)->wait();
        if (rank == last)
          expect(equal_to(r, expected_reduction(op, dtype, n, world), tolerance),
                 std::string("reduce(") + dist::reduce_op_name(op) + ") of " + where);
      }
      for (int root = 0; root < world; ++root) {
        Tensor b = rank_tensor(rank, n, dtype);
        group.broadcast(b, root)->wait();
        expect(equal_to(b, rank_values(root, n, dtype)), "broadcast from " + std::to_string(root) + " of " + where);
      }
      std::vector<Tensor> gathered;
      for (int r = 0; r < world; ++r) gathered.push_back(empty({n}, {dtype, gpu()}));
      group.all_gather(gathered, rank_tensor(rank, n, dtype))->wait();
      for (int r = 0; r < world; ++r) expect(equal_to(gathered[r], rank_values(r, n, dtype)), "all_gather of " + where);
      std::vector<Tensor> at_root;
      if (rank == last)
        for (int r = 0; r < world; ++r) at_root.push_back(empty({n}, {dtype, gpu()}));
      group.gather(at_root, rank_tensor(rank, n, dtype), last)->wait();
      for (size_t r = 0; r < at_root.size(); ++r)
        expect(equal_to(at_root[r], rank_values(static_cast<int>(r), n, dtype)), "gather of " + where);
      std::vector<Tensor> pieces;
      if (rank == 0)
        for (int r = 0; r < world; ++r) pieces.push_back(rank_tensor(r + 10, n, dtype));
      Tensor piece = empty({n}, {dtype, gpu()});
      group.scatter(piece, pieces, 0)->wait();
      expect(equal_to(piece, rank_values(rank + 10, n, dtype)), "scatter of " + where);
    }
  group.barrier()->wait();

  // Asynchronous: issue several, wait in reverse order; they still ran in issue order, and after
  // wait() the compute stream sees each result.
  std::vector<Tensor> tensors;
  std::vector<dist::WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    tensors.push_back(full({1000}, rank + k, {DType::f32}).to(gpu()));
    works.push_back(group.all_reduce(tensors.back()));
  }
  for (int k = 3; k >= 0; --k) {
    works[static_cast<size_t>(k)]->wait();
    const double sum = world * (world - 1) / 2.0 + world * k;
    expect(equal_to(tensors[static_cast<size_t>(k)], std::vector<double>(1000, sum)), "async all_reduce " + std::to_string(k));
  }
  cuda::synchronize();
  for (const auto& work : works) expect(work->is_completed(), "is_completed after the GPU finished");

  // broadcast_coalesced packs mixed dtypes (and a non-contiguous view) into one byte buffer.
  Tensor weights = (rank_tensor(rank, 12, DType::f32)).view({3, 4});
  Tensor counts = rank_tensor(rank, 5, DType::i64);
  Tensor halves = rank_tensor(rank, 3, DType::f16);
  dist::broadcast_coalesced(group, {weights.t(), counts, halves}, 0);
  expect(equal_to(weights.view({12}), rank_values(0, 12, DType::f32)), "broadcast_coalesced f32 (transposed view)");
  expect(equal_to(counts, rank_values(0, 5, DType::i64)), "broadcast_coalesced i64");
  expect(equal_to(halves, rank_values(0, 3, DType::f16)), "broadcast_coalesced f16");
}

// The tensors must be CUDA tensors of this rank's GPU, contiguous.
void wrong_tensors() {
  dist::ProcessGroup& group = dist::default_group();
  for (const Tensor& bad : {ones({4}), ones({4, 2}).to(gpu()).t()}) {
    Tensor t = bad;
    try {
      group.all_reduce(t)->wait();
      expect(false, "all_reduce accepted a tensor on " + t.device().str());
    } catch (const Error& e) {
      std::cout << "rank " << group.rank() << ": " << e.what() << "\n";
    }
  }
}

// A collective stuck behind a long queue of GPU work outlives a 1 ms timeout: the watchdog
// aborts the communicator and the group throws, naming the collective.
void overdue() {
  dist::ProcessGroup& group = dist::default_group();
  // 30 products of 8192 x 8192 f32 matrices: 33 TFLOP, at least ~0.1 s on any GPU (even with
  // TF32), far past the watchdog's first look 50 ms after the collective is issued.
  const Tensor x = randn({8192, 8192}).to(gpu());
  Tensor y;
  for (int i = 0; i < 30; ++i) y = x.matmul(x);
  group.set_timeout(std::chrono::milliseconds(1));
  Tensor t = ones({10}).to(gpu());
  group.all_reduce(t)->wait();
  cuda::synchronize();
  group.barrier()->wait();
}

// Rank 1 never issues the collective rank 0 waits in.
void late() {
  dist::ProcessGroup& group = dist::default_group();
  if (group.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    std::_Exit(0);  // gone without destroying its communicator
  }
  Tensor t = ones({10}).to(gpu());
  group.all_reduce(t)->wait();
  cuda::synchronize();  // returns once the watchdog's abort has ended the stuck kernel
  group.barrier()->wait();
}

// Under SG_DIST_DEBUG=1: rank 1 reduces a tensor of another shape than rank 0's.
void mismatch() {
  dist::ProcessGroup& group = dist::default_group();
  Tensor t = ones({group.rank() == 0 ? 10 : 11}).to(gpu());
  group.all_reduce(t)->wait();
}

// tests/test_ddp.cpp's equivalence on the GPU: ranks start from different weights, DDP copies
// rank 0's; rank 0 saves the result.
void ddp_equivalence(const std::string& out) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  auto model = ddp::make_mlp(rank == 0 ? 1 : 100 + rank);
  model->to(gpu());
  auto ddp_model = std::make_shared<dist::DistributedDataParallel>(model, dist::DDPOptions{.bucket_cap_mb = 0.001});
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  ddp::train(*ddp_model, begin, end, 1, [](int, int, const std::function<void()>& step) { step(); }, gpu());
  if (rank != 0) return;
  nn::StateDict on_host;
  for (const auto& [name, value] : ddp_model->module().state_dict()) on_host.emplace(name, value.to(Device::cpu()));
  save_safetensors(out + "/params.safetensors", on_host);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    dist::InitOptions options;
    options.backend = "nccl";
    dist::init_process_group(options);
    if (scenario == "all") {
      all_collectives();
    } else if (scenario == "wrong_tensors") {
      wrong_tensors();
    } else if (scenario == "overdue") {
      overdue();
    } else if (scenario == "late") {
      late();
    } else if (scenario == "mismatch") {
      mismatch();
    } else if (scenario == "ddp" && argc > 2) {
      ddp_equivalence(argv[2]);
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
