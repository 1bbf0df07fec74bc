// DDP's communication hooks (dist/comm_hook.h, dist/default_hooks.h): what a hook is given and
// when, on 2 ranks over Gloo (tests/dist_worker_comm_hooks.cpp) and in one process against a fake
// process group; what the 16-bit compression hooks cost in precision; the errors of registering one.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "dist_harness.h"
#include "fake_process_group.h"
#include "helpers.h"

using namespace sg;

namespace {

// Rank 0's parameters after the worker's `scenario` (train_mlp in the worker) on 2 ranks.
std::map<std::string, Tensor> trained_parameters(const std::vector<std::string>& scenario) {
  test::TempDir out;
  std::vector<std::string> args{scenario.front(), out.path()};
  args.insert(args.end(), scenario.begin() + 1, scenario.end());
  const auto result = test::run_ranks(SG_DIST_WORKER_COMM_HOOKS, 2, args);
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  return load_safetensors(out.path() + "/params.safetensors").tensors;
}

void check_bit_identical(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, value] : want) {
    INFO("parameter ", name);
    CHECK(test::values(got.at(name)) == test::values(value));
  }
}

// Each rank's gradients before ("local") and after ("average") one backward with `hook`.
struct Averaged {
  std::vector<double> local[2], average[2];
  Tensor rank0_average;
};
Averaged averaged(const std::string& hook, const std::string& values, const std::string& shared_memory,
                  const std::string& through = "ddp") {
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_COMM_HOOKS, 2, {"average", out.path(), hook, values, through},
                                      {{"SG_SHM_ALLREDUCE", shared_memory}});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  Averaged gradients;
  for (int rank = 0; rank < 2; ++rank) {
    const SafetensorsFile file = load_safetensors(out.path() + "/rank" + std::to_string(rank) + ".safetensors");
    gradients.local[rank] = test::values(file.tensors.at("local"));
    gradients.average[rank] = test::values(file.tensors.at("average"));
    if (rank == 0) gradients.rank0_average = file.tensors.at("average");
  }
  return gradients;
}

// Each rank's average is the exact one within the rounding of `hook` (fp16 or bf16), and bit
// for bit what 16-bit steps give: the gradients did travel in 16 bits. Both ranks hold the same bits.
void check_16_bit_average(const Averaged& gradients, const std::string& hook) {
  // The cast and the sum each round once (the division by 2 is exact): at most one unit roundoff
  // u of |a| / 2 + |b| / 2 and one of the sum, so 2u (|a| + |b|) / 2, plus f16's smallest step
  // for values that fall below its normal range (6e-5).
  const double u = hook == "fp16" ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double smallest_step = hook == "fp16" ? std::ldexp(1.0, -24) : 0.0;
  for (size_t i = 0; i < gradients.local[0].size(); ++i) {
    const double a = gradients.local[0][i], b = gradients.local[1][i];
    CAPTURE(i);
    CHECK(std::abs(gradients.average[0][i] - (a + b) / 2) <=
          2 * u * (std::abs(a) + std::abs(b)) / 2 + 2 * smallest_step);
  }
  // Exactly the hook's steps: each rank's gradients halved and cast to 16 bits, then summed in
  // f32 and rounded once to 16 bits (Gloo's and the shared-memory all-reduce's sum).
  const DType wire = hook == "fp16" ? DType::f16 : DType::bf16;
  const auto sent = [&](int rank) { return (tensor(gradients.local[rank]) / 2.0).to(wire).to(DType::f32); };
  const Tensor expected = (sent(0) + sent(1)).to(wire).to(DType::f32);
  CHECK(test::max_abs_diff(gradients.rank0_average, expected) == 0);
  CHECK(gradients.average[0] == gradients.average[1]);
}

// A hook that counts its calls and averages with allreduce_hook.
dist::CommHook counting_hook(std::vector<size_t>& buckets_seen) {
  return [&buckets_seen](dist::ProcessGroup& group, dist::GradBucket& bucket) {
    buckets_seen.push_back(bucket.index());
    return dist::allreduce_hook(group, bucket);
  };
}

std::shared_ptr<nn::Linear> small_linear() {
  Generator generator(4);
  return std::make_shared<nn::Linear>(3, 2, true, &generator);
}

}  // namespace

TEST_CASE(
    "a custom hook runs once per bucket of each synchronised backward, with its buffer and views, not in no_sync") {
  // The worker checks every call against the reducer's buckets after each backward; its hook
  // averages with allreduce_hook, so training ends where DDP without a hook does.
  check_bit_identical(trained_parameters({"custom"}), trained_parameters({"train", "no"}));
}

TEST_CASE("the allreduce hook trains bit for bit as DDP without a hook") {
  check_bit_identical(trained_parameters({"train", "allreduce"}), trained_parameters({"train", "no"}));
}

TEST_CASE("fp16 and bf16 compression average random gradients within 16-bit rounding, over shared memory and TCP") {
  for (const char* hook : {"fp16", "bf16"})
    for (const char* shared_memory : {"1", "0"}) {
      CAPTURE(hook);
      CAPTURE(shared_memory);
      check_16_bit_average(averaged(hook, "random", shared_memory), hook);
    }
}

TEST_CASE("the Accelerator's comm_hook option sends the gradients of the model it prepares through that hook") {
  check_16_bit_average(averaged("bf16", "random", "1", "accelerator"), "bf16");
}

TEST_CASE("fp16 and bf16 compression give the exact average of gradients whose average 16 bits hold") {
  for (const char* hook : {"fp16", "bf16"}) {
    CAPTURE(hook);
    const Averaged gradients = averaged(hook, "representable", "1");
    for (size_t i = 0; i < gradients.local[0].size(); ++i) {
      CAPTURE(i);
      CHECK(gradients.average[0][i] == (gradients.local[0][i] + gradients.local[1][i]) / 2);
    }
  }
}

TEST_CASE("a DDP trained with the fp16 hook stays within 16-bit rounding of one without") {
  const auto compressed = trained_parameters({"train", "fp16"});
  const auto exact = trained_parameters({"train", "no"});
  for (const auto& [name, value] : exact) {
    INFO("parameter ", name);
    const auto got = test::values(compressed.at(name)), want = test::values(value);
    for (size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-3 * (std::abs(want[i]) + 1));
  }
}

// The worker's PowerSGD run (tests/dist_worker_comm_hooks.cpp, powersgd) on 2 ranks.
std::map<std::string, Tensor> powersgd_run(bool error_feedback) {
  test::TempDir out;
  const auto result =
      test::run_ranks(SG_DIST_WORKER_COMM_HOOKS, 2, {"powersgd", out.path(), error_feedback ? "1" : "0"});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  return load_safetensors(out.path() + "/powersgd.safetensors").tensors;
}

TEST_CASE("PowerSGD averages exactly before start_powerSGD_iter, and after it when the average has rank r") {
  for (bool error_feedback : {true, false}) {
    CAPTURE(error_feedback);
    const auto saved = powersgd_run(error_feedback);
    // Step 1 is before compression starts: the all-reduce's f32 average.
    CHECK(test::max_abs_diff(saved.at("average1"), (saved.at("local1_r0") + saved.at("local1_r1")) / 2.0) <= 1e-6);
    // Step 2: rank-1 matrices with one u, so their average is rank 1 and one power iteration
    // finds it (up to f32 rounding in two products and the orthogonalisation); biases are 1-D,
    // averaged exactly.
    CHECK(test::max_abs_diff(saved.at("average2"), (saved.at("local2_r0") + saved.at("local2_r1")) / 2.0) <= 1e-5);
  }
}

TEST_CASE("PowerSGD's error feedback carries what a rank-1 approximation missed into later steps") {
  // 40 steps of the same full-rank G: a rank-1 approximation alone keeps leaving out most of G (relative error
  // about 0.88 in this run, every step), whereas with the error fed back the sum of the 40
  // averages misses 40 G only by the last error (0.18 of it in this run).
  const auto relative_error = [](const std::map<std::string, Tensor>& saved) {
    const Tensor wanted = saved.at("G").narrow(0, 0, 16 * 12) * 40.0;
    return (saved.at("sum").narrow(0, 0, 16 * 12) - wanted).norm().item() / wanted.norm().item();
  };
  const auto with_feedback = powersgd_run(true);
  CHECK(relative_error(with_feedback) < 0.4);
  CHECK(relative_error(powersgd_run(false)) > 0.6);
  // The bias is 1-D: averaged exactly each step (up to the 40 f32 additions of the sum).
  CHECK(test::max_abs_diff(with_feedback.at("sum").narrow(0, 16 * 12, 5),
                           with_feedback.at("G").narrow(0, 16 * 12, 5) * 40.0) <= 1e-4);
}

TEST_CASE("with find_unused_parameters the hook also sends the buckets of parameters that got no gradient") {
  Tensor used = randn({300}, {}, &test::rng()).requires_grad_(),
         unused = randn({300}, {}, &test::rng()).requires_grad_();
  test::FakeProcessGroup group(0, 2);
  auto reducer = std::make_shared<dist::Reducer>(TensorList{used, unused}, std::vector<std::string>{"used", "unused"},
                                                 group, /*bucket_cap_bytes=*/1000, /*find_unused_parameters=*/true);
  reducer->install_hooks();
  REQUIRE(reducer->buckets().size() == 2);
  std::vector<size_t> buckets_seen;
  reducer->register_comm_hook(counting_hook(buckets_seen));
  const Tensor x = randn({300}, {}, &test::rng());
  reducer->prepare_for_backward(true);
  (used * x).sum().backward();
  CHECK(buckets_seen == std::vector<size_t>{0, 1});
  CHECK_FALSE(unused.grad().defined());
  CHECK(test::max_abs_diff(used.grad(), x * 0.5) < 1e-6);  // the other (fake) rank sent zeros
}

TEST_CASE("register_comm_hook a second time is an error naming DistributedDataParallel") {
  test::FakeProcessGroup group(0, 1);
  dist::DistributedDataParallel ddp(small_linear(), {}, &group);
  ddp.register_comm_hook(dist::fp16_compress_hook);
  CHECK_THROWS_WITH_AS(
      ddp.register_comm_hook(dist::bf16_compress_hook),
      doctest::Contains("DistributedDataParallel (rank 0): register_comm_hook can only be called once"), Error);
}

TEST_CASE("register_comm_hook after a synchronised backward is an error, after no_sync backwards it is not") {
  test::FakeProcessGroup group(0, 1);
  dist::DistributedDataParallel ddp(small_linear(), {}, &group);
  const Tensor x = randn({4, 3}, {}, &test::rng());
  {
    auto no_sync = ddp.no_sync();
    ddp(x).sum().backward();
  }
  std::vector<size_t> buckets_seen;
  ddp.register_comm_hook(counting_hook(buckets_seen));
  ddp(x).sum().backward();
  CHECK(buckets_seen == std::vector<size_t>{0});

  dist::DistributedDataParallel late(small_linear(), {}, &group);
  late(x).sum().backward();
  CHECK_THROWS_WITH_AS(late.register_comm_hook(dist::allreduce_hook),
                       doctest::Contains("register_comm_hook must be called before the first synchronised backward"),
                       Error);
}

TEST_CASE("a hook that returns no Work is an error naming the bucket") {
  test::FakeProcessGroup group(0, 1);
  dist::DistributedDataParallel ddp(small_linear(), {}, &group);
  ddp.register_comm_hook([](dist::ProcessGroup&, dist::GradBucket&) { return dist::WorkPtr(); });
  CHECK_THROWS_WITH_AS(ddp(randn({4, 3}, {}, &test::rng())).sum().backward(),
                       doctest::Contains("the communication hook returned no Work for bucket 0"), Error);
}

TEST_CASE("then runs its continuation once, after the collective, and every wait rethrows its error") {
  test::FakeProcessGroup group(0, 2);
  Tensor t = randn({5}, {}, &test::rng());
  int runs = 0;
  dist::WorkPtr work = dist::then(group.all_reduce(t, dist::ReduceOp::SUM), [&] { ++runs; });
  CHECK_FALSE(work->is_completed());
  work->wait();
  work->wait();
  CHECK(runs == 1);
  CHECK(work->is_completed());

  dist::WorkPtr failing = dist::then(group.all_reduce(t, dist::ReduceOp::SUM), [] { SG_FAIL("decompression failed"); });
  CHECK_THROWS_WITH_AS(failing->wait(), doctest::Contains("decompression failed"), Error);
  CHECK_THROWS_WITH_AS(failing->wait(), doctest::Contains("decompression failed"), Error);
}

TEST_CASE("an unknown comm_hook name is an error listing the built-in hooks") {
  dist::AcceleratorOptions options;
  options.comm_hook = "fp8";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options},
                       doctest::Contains("unknown DDP communication hook \"fp8\": the built-in ones are \"no\""),
                       Error);
}
