// dist::ZeroRedundancyOptimizer (ZeRO-1): on real ranks (tests/dist_worker_zero.cpp) it trains as
// plain DDP does while each rank keeps only its shard of the state, and its state dicts go both
// ways to and from a plain optimizer's; with ZeRO-2's gradient hook, each rank receives its
// shard's averages and the run is still plain DDP's; in one process, against a fake group, the errors.
#include "dist_harness.h"
#include "fake_process_group.h"
#include "helpers.h"

using namespace sg;

namespace {

TensorList random_parameters(const std::vector<int64_t>& numels, DType dtype = DType::f32) {
  TensorList params;
  for (int64_t numel : numels) params.push_back(test::rand_input({numel}).detach().to(dtype).requires_grad_());
  return params;
}

}  // namespace

TEST_CASE("ZeRO-1 AdamW and SGD with momentum train as plain DDP does on 2 and 3 ranks, each rank holding its shard") {
  for (const char* optimizer : {"adamw", "sgd"})
    for (int world : {2, 3}) {
      CAPTURE(optimizer);
      CAPTURE(world);
      const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, world, {optimizer});
      INFO(result.summary());
      CHECK(result.all_succeeded());
    }
}

TEST_CASE("ZeRO-1 partitions whole parameters largest first, each to the rank owning the fewest elements") {
  // Elements 10, 40, 30, 20, 5. Two ranks: 40 -> 0, 30 -> 1, 20 -> 1, 10 -> 0, 5 -> 0 (a tie at 50).
  // Three ranks: 40 -> 0, 30 -> 1, 20 -> 2, 10 -> 2, 5 -> 1 (a tie at 30 between ranks 1 and 2).
  for (const auto& [world, owners] : {std::pair{2, "owners 00110"}, std::pair{3, "owners 20121"}}) {
    const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, world, {"partition"});
    INFO(result.summary());
    REQUIRE(result.all_succeeded());
    for (int r = 0; r < world; ++r) CHECK(test::contains(result.output(r), owners));
  }
}

TEST_CASE("ZeRO-1 refuses on every rank when the ranks' parameters differ") {
  const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, 2, {"different_models"});
  INFO(result.summary());
  for (int r = 0; r < 2; ++r) {
    CHECK(result.exit_code(r) == 3);
    CHECK(test::contains(result.output(r), "the ranks' parameters differ, so they cannot share one partition"));
  }
}

TEST_CASE(
    "Accelerator save_state of a ZeRO-1 optimizer writes the whole state, which load_state and a plain AdamW read") {
  test::TempDir dir;
  const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, 2, {"accelerator", dir.path() + "/snapshot.safetensors"});
  INFO(result.summary());
  CHECK(result.all_succeeded());
}

TEST_CASE("ZeRO-1 on one rank steps exactly as the optimizer it wraps") {
  test::FakeProcessGroup group(0, 1);
  TensorList plain_params = random_parameters({7, 30, 2});
  TensorList zero_params;
  for (const Tensor& p : plain_params) zero_params.push_back(p.detach().clone().requires_grad_());
  optim::AdamW plain(plain_params, {.lr = 0.1});
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::AdamW>(zero_params, optim::AdamWOptions{.lr = 0.1}),
                                     &group);
  for (int step = 0; step < 3; ++step)
    for (size_t i = 0; i < plain_params.size(); ++i) {
      const Tensor grad = test::rand_input(plain_params[i].sizes()).detach().to(DType::f32);
      plain_params[i].set_grad(grad);
      zero_params[i].set_grad(grad.clone());
      if (i + 1 == plain_params.size()) {
        plain.step();
        zero.step();
      }
    }
  for (size_t i = 0; i < plain_params.size(); ++i) CHECK(test::max_abs_diff(plain_params[i], zero_params[i]) == 0);
  CHECK(zero.type_name() == "ZeroRedundancyOptimizer(AdamW)");
  CHECK(zero.named_state({}).empty());
  zero.consolidate_state_dict(0);
  CHECK(zero.state_dict().type == "AdamW");
  CHECK(zero.state_dict().tensors.size() == plain.state_dict().tensors.size());
}

TEST_CASE("ZeRO-1 refuses a missing optimizer, mixed dtypes, an unconsolidated state_dict and a bad rank") {
  test::FakeProcessGroup group(0, 1);
  CHECK_THROWS_WITH_AS(dist::ZeroRedundancyOptimizer(nullptr, &group),
                       doctest::Contains("ZeroRedundancyOptimizer: got no optimizer to wrap"), Error);
  TensorList mixed = random_parameters({4, 3});
  mixed.push_back(test::rand_input({2}).detach().requires_grad_());  // f64
  CHECK_THROWS_WITH_AS(dist::ZeroRedundancyOptimizer(std::make_unique<optim::SGD>(mixed), &group),
                       doctest::Contains("ZeroRedundancyOptimizer(SGD): parameter 2 is f64[2] but parameter 0 is f32"),
                       Error);
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::SGD>(random_parameters({4, 3})), &group);
  CHECK_THROWS_WITH_AS(zero.state_dict(), doctest::Contains("call consolidate_state_dict(to) on every rank first"),
                       Error);
  CHECK_THROWS_WITH_AS(zero.consolidate_state_dict(1),
                       doctest::Contains("consolidate_state_dict: rank 1 is not a rank of this group of 1"), Error);
  zero.consolidate_state_dict(0);
  zero.step();  // a step makes the consolidated state stale
  CHECK_THROWS_AS(zero.state_dict(), Error);
}

namespace {

// The worker's stage2 scenario on `world` ranks (its arguments in any failure's message); returns
// rank 0's output.
std::string run_stage2(int world, const std::string& optimizer, const std::string& bucket_mb,
                       const std::string& micro_batches, const std::string& shared_memory = "1") {
  CAPTURE(world);
  CAPTURE(optimizer);
  CAPTURE(bucket_mb);
  CAPTURE(micro_batches);
  const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, world, {"stage2", optimizer, bucket_mb, micro_batches},
                                      {{"SG_SHM_ALLREDUCE", shared_memory}});
  INFO(result.summary());
  CHECK(result.all_succeeded());
  return result.output(0);
}

}  // namespace

TEST_CASE("ZeRO-2 gradients train AdamW and SGD with momentum as plain DDP does on 2 and 3 ranks") {
  // The MLP's 1540 gradients fit one bucket; its largest owner holds 1024 of them, so even on 3
  // ranks the staging buffer (3 x 1024) is under twice the bucket: every backward reduce-scatters.
  for (int world : {2, 3})
    for (const char* optimizer : {"adamw", "sgd"})
      CHECK(test::contains(run_stage2(world, optimizer, "25", "1"), "buckets reduce-scattered 20, all-reduced 0"));
}

TEST_CASE("ZeRO-2 all-reduces the buckets whose padding would cost more than an all-reduce") {
  // A 1 KB cap gives three buckets: [w0 320], [b0 32, w1 1024], [b1 32, w2 128, b2 4]. On 3 ranks
  // the owners (w1: 0, w0: 1, the rest: 2) make each bucket lopsided, so each is all-reduced; on
  // 2 ranks padding never costs that much.
  CHECK(test::contains(run_stage2(3, "adamw", "0.001", "1"), "buckets reduce-scattered 0, all-reduced 60"));
  CHECK(test::contains(run_stage2(2, "adamw", "0.001", "1"), "buckets reduce-scattered 60, all-reduced 0"));
}

TEST_CASE("ZeRO-2 gradients accumulated under no_sync are reduce-scattered as their sum, as plain DDP averages it") {
  CHECK(test::contains(run_stage2(3, "adamw", "25", "3"), "buckets reduce-scattered 20, all-reduced 0"));
  CHECK(test::contains(run_stage2(2, "sgd", "0.001", "2"), "buckets reduce-scattered 60, all-reduced 0"));
}

TEST_CASE("Accelerator with zero_shard_gradients registers the hook, clips through ZeRO and refuses what cannot work") {
  const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, 2, {"stage2_accelerator"});
  INFO(result.summary());
  CHECK(result.all_succeeded());
}

TEST_CASE("Accelerator with zero_shard_gradients skips an f16 step on every rank when an inf reached one owner only") {
  const auto result = test::run_ranks(SG_DIST_WORKER_ZERO, 3, {"stage2_found_inf"});
  INFO(result.summary());
  CHECK(result.all_succeeded());
}

TEST_CASE("Accelerator refuses zero_shard_gradients together with a communication hook") {
  dist::AcceleratorOptions options;
  options.zero_shard_gradients = true;
  options.comm_hook = "fp16";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options},
                       doctest::Contains("zero_shard_gradients sends DDP's buckets through the ZeRO optimizer's "
                                         "reduce-scatter hook, so it cannot also send them through comm_hook \"fp16\""),
                       Error);
}

TEST_CASE("ZeRO clip_grad_norm_ refuses a parameter the optimizer does not step") {
  test::FakeProcessGroup group(0, 1);
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::SGD>(random_parameters({4, 3})), &group);
  const TensorList foreign = random_parameters({5});
  CHECK_THROWS_WITH_AS(zero.clip_grad_norm_(foreign, 1.0),
                       doctest::Contains("ZeroRedundancyOptimizer(SGD).clip_grad_norm_ (rank 0): parameter 0 of shape "
                                         "[5] is not one of this optimizer's"),
                       Error);
}

TEST_CASE("ZeRO-2 on Gloo's TCP all-reduces the padded staging buffer, more bytes than plain DDP's bucket") {
  // Gloo's reduce_scatter_tensor is an all-reduce of its input (ProcessGroupGloo): P x 1024
  // floats of the MLP's one bucket against its 1540. NCCL's reduce-scatter sends less instead.
  CHECK(test::contains(run_stage2(2, "adamw", "25", "1", "0"), "per step: plain 6160, zero-2 8192"));
  CHECK(test::contains(run_stage2(3, "adamw", "25", "1", "0"), "per step: plain 6160, zero-2 12288"));
}
