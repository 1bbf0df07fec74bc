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

#include "collective_expectations.h"
#include "core/cuda_runtime/runtime.h"
#include "ddp_scenarios.h"
#include "syncgrad.h"

using namespace sg;
using namespace sg::test::collectives;
namespace ddp = sg::test::ddp;

namespace {

Device gpu() { return Device::cuda(dist::get_local_rank()); }

// AVG over a world size that is not a power of two: NCCL multiplies every input by 1/size (not
// exact) and sums in the tensor's dtype, so the result is off by a few units of its last place.
// The means here are at most 5: four units of the last place at 4..8 (absolute).
double avg_tolerance(DType dtype, int world) {
  if ((world & (world - 1)) == 0) return 0;
  switch (dtype) {
    case DType::f16: return 4 * 0x1p-8;
    case DType::bf16: return 4 * 0x1p-5;
    case DType::f32: return 4 * 0x1p-21;
    case DType::f64: return 4 * 0x1p-50;
    default: return 0;
  }
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
  // A model left on the CPU under the GPU's group.
  try {
    dist::DistributedDataParallel ddp(test::ddp::make_mlp(7));
    expect(false, "DistributedDataParallel accepted a CPU model under an NCCL group");
  } catch (const Error& e) {
    std::cout << "rank " << group.rank() << ": " << e.what() << "\n";
  }
}

// A collective stuck behind a long queue of GPU work outlives a 1 ms timeout: the watchdog
// aborts the communicator and the group throws, naming the collective.
void overdue() {
  dist::ProcessGroup& group = dist::default_group();
  // 30 products of 8192 x 8192 f32 matrices: 33 TFLOP, at least ~0.1 s on any GPU (even with
  // TF32), far past the watchdog's first look 50 ms after the collective is issued.
  // Every upload comes first: a host-to-device copy waits for the GPU work queued before it
  // (Note [One compute stream]), which would leave the collective nothing to wait behind.
  const Tensor x = randn({8192, 8192}).to(gpu());
  Tensor t = ones({10}).to(gpu());
  Tensor y;
  for (int i = 0; i < 30; ++i) y = x.matmul(x);
  group.set_timeout(std::chrono::milliseconds(1));
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
  ddp::train(
      *ddp_model, begin, end, 1, [](int, int, const std::function<void()>& step) { step(); }, gpu());
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
      check_every_collective(dist::default_group(), gpu(),
                             [](DType dtype) { return avg_tolerance(dtype, dist::get_world_size()); });
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
