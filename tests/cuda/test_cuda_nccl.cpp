// The NCCL process group across real processes, one per GPU (tests/nccl_worker.cpp checks the
// values). NCCL refuses two ranks on one GPU, so with one GPU the group has one rank: every
// collective, op, dtype and size still runs through NCCL, the streams and the watchdog; the
// cases that need two ranks say so and pass without running.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/cuda_runtime/runtime.h"
#include "cuda_compare.h"
#include "ddp_scenarios.h"
#include "dist_harness.h"
#include "helpers.h"

using namespace sg;
namespace ddp = sg::test::ddp;

namespace {

// tests/nccl_worker lies next to this binary: in the build tree and in the GPU bundle
// (scripts/gpu-bundle.sh), which is unpacked elsewhere on the GPU machine.
std::string nccl_worker() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "nccl_worker").string();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// 1 to 3 ranks, as many as there are GPUs.
int ranks_for_gpus() { return std::min(cuda::device_count(), 3); }

bool have_two_gpus(const char* test) {
  if (cuda::device_count() >= 2) return true;
  std::printf("%s: needs 2 GPUs, this machine has %d; not run\n", test, cuda::device_count());
  return false;
}

}  // namespace

TEST_CASE("nccl: every collective, reduce op, dtype and size (0, 1, 7, 300007) gives the right values") {
  const int world = ranks_for_gpus();
  CAPTURE(world);
  const auto result = test::run_ranks(nccl_worker(), world, {"all"}, {}, 300);
  INFO(result.summary());
  CHECK(result.all_succeeded());
}

TEST_CASE(
    "nccl: a CPU tensor, a non-contiguous one or a CPU model under DDP is an error naming the device or the layout") {
  const auto result = test::run_ranks(nccl_worker(), 1, {"wrong_tensors"});
  INFO(result.summary());
  CHECK(result.exit_code(0) == 0);
  CHECK(contains(result.output(0),
                 "ProcessGroupNCCL::all_reduce: tensor is on cpu; this rank's nccl group works on cuda:0"));
  CHECK(contains(result.output(0), "ProcessGroupNCCL::all_reduce: tensor of shape [2, 4] must be contiguous"));
  CHECK(contains(result.output(0), "DistributedDataParallel: '"));
  CHECK(contains(result.output(0), "' is on cpu, but the process group (nccl) works on cuda:0"));
}

TEST_CASE("nccl: a collective past its timeout is aborted by the watchdog and the group throws, naming it") {
  const auto result = test::run_ranks(nccl_worker(), 1, {"overdue"});
  INFO(result.summary());
  CHECK(result.exit_code(0) == 3);
  CHECK(contains(result.output(0),
                 "ProcessGroupNCCL (rank 0 of 1, cuda:0): all_reduce(SUM) #0 on f32[10] (40 bytes) "
                 "timed out after 1 ms"));
  CHECK(contains(result.output(0), "barrier #1 cannot run: the group failed earlier"));
}

TEST_CASE("nccl: a rank that never reaches a collective: the other times out naming it and the collective") {
  if (!have_two_gpus("nccl late rank")) return;
  const auto result = test::run_ranks(nccl_worker(), 2, {"late"}, {{"SG_DIST_TIMEOUT", "1"}});
  INFO(result.summary());
  CHECK(result.exit_code(0) == 3);
  CHECK(contains(result.output(0), "all_reduce(SUM) #0 on f32[10] (40 bytes) timed out after 1000 ms"));
  CHECK(contains(result.output(0), "rank(s) 1 never reached collective #0"));
}

TEST_CASE("nccl: SG_DIST_DEBUG: ranks calling different collectives all fail, showing both sides") {
  if (!have_two_gpus("nccl SG_DIST_DEBUG")) return;
  const auto result = test::run_ranks(nccl_worker(), 2, {"mismatch"}, {{"SG_DIST_DEBUG", "1"}});
  INFO(result.summary());
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(result.exit_code(rank) == 3);
    CHECK(contains(result.output(rank),
                   "SG_DIST_DEBUG: the ranks disagree on collective #0: rank 0 called "
                   "all_reduce(SUM) #0 on f32[10] (40 bytes) but rank 1 called all_reduce(SUM) "
                   "#0 on f32[11] (44 bytes)"));
  }
}

TEST_CASE("nccl: DDP on the GPUs equals one CPU process on the whole batch") {
  const int world = std::min(cuda::device_count(), 2);
  CAPTURE(world);
  auto reference = ddp::make_mlp(1);
  ddp::train(*reference, 0, ddp::kGlobalBatch, 1, [](int, int, const std::function<void()>& step) { step(); });
  test::TempDir out;
  const auto result = test::run_ranks(nccl_worker(), world, {"ddp", out.path()}, {}, 120);
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  const SafetensorsFile got = load_safetensors(out.path() + "/params.safetensors");
  const nn::StateDict expected = reference->state_dict();
  REQUIRE(got.tensors.size() == expected.size());
  for (const auto& [name, want] : expected) {
    INFO("parameter ", name);
    REQUIRE(got.tensors.count(name) == 1);
    // f32 on both sides; the GPU sums matmuls and the all-reduce in another order than the CPU.
    test::check_matches_cpu(got.tensors.at(name).to(test::gpu()), want, 1e-4);
  }
}
