// DistributedDataParallel and SyncBatchNorm across real processes on loopback: the result of N
// ranks must equal the single-process run on the whole batch (tests/ddp_scenarios.h).
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ddp_scenarios.h"
#include "dist_harness.h"
#include "helpers.h"

using namespace sg;
namespace ddp = sg::test::ddp;

namespace {

// The single-process reference: the MLP rank 0 starts from, trained on the whole batch.
nn::StateDict reference_parameters() {
  auto model = ddp::make_mlp(1);
  ddp::train(*model, 0, ddp::kGlobalBatch, 1, [](int, int, const std::function<void()>& step) { step(); });
  return model->state_dict();
}

// |a - b| <= 1e-5 * (|b| + 1e-3) for every element, naming the tensor that differs.
void check_same_parameters(const std::string& file, const nn::StateDict& expected) {
  const SafetensorsFile got = load_safetensors(file);
  REQUIRE(got.tensors.size() == expected.size());
  for (const auto& [name, want] : expected) {
    INFO("parameter ", name);
    REQUIRE(got.tensors.count(name) == 1);
    const auto g = test::values(got.tensors.at(name)), w = test::values(want);
    REQUIRE(g.size() == w.size());
    for (size_t i = 0; i < g.size(); ++i) CHECK(std::abs(g[i] - w[i]) <= 1e-5 * (std::abs(w[i]) + 1e-3));
  }
}

}  // namespace

TEST_CASE("DDP on 2 ranks x batch 32 equals 1 rank x batch 64 after 5 SGD-momentum steps") {
  const nn::StateDict expected = reference_parameters();
  // One 25 MB bucket; ~1 KB buckets (each weight larger than the cap alone, the biases packed
  // together); micro-batches accumulated under no_sync; gradients set to none between steps (the
  // fresh ones are copied into the buckets) or zeroed in place (backward accumulates into the
  // buckets, which .grad views). Every rank checks after each step that .grad views a bucket.
  for (const char* cap : {"25", "0.001"})
    for (const char* micro_batches : {"1", "2"})
      for (const char* zero_grad : {"none", "zero"}) {
        CAPTURE(cap);
        CAPTURE(micro_batches);
        CAPTURE(zero_grad);
        test::TempDir out;
        const auto result =
            test::run_ranks(SG_DIST_WORKER_DDP, 2, {"equivalence", out.path(), cap, micro_batches, "", zero_grad});
        INFO(result.summary());
        REQUIRE(result.all_succeeded());
        check_same_parameters(out.path() + "/params.safetensors", expected);
      }
}

TEST_CASE(
    "DDP of a model with activation checkpointing on 2 ranks equals 1 plain rank, no_sync accumulation included") {
  // The first segment's gradients reach DDP during its recomputation inside backward: each still
  // marked ready once (the reducer refuses a second), in buckets of 25 MB or ~1 KB. With 2
  // micro-batches the first accumulates locally under no_sync and the second's backward averages
  // the sum. Every rank checks after each step that .grad views a bucket.
  const nn::StateDict expected = reference_parameters();
  for (const char* cap : {"25", "0.001"})
    for (const char* micro_batches : {"1", "2"}) {
      CAPTURE(cap);
      CAPTURE(micro_batches);
      test::TempDir out;
      const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2,
                                          {"equivalence", out.path(), cap, micro_batches, "", "none", "checkpointed"});
      INFO(result.summary());
      REQUIRE(result.all_succeeded());
      check_same_parameters(out.path() + "/params.safetensors", expected);
    }
}

TEST_CASE("DDP::call: a model with two inputs and two outputs on 2 ranks equals 1 rank on the combined batch") {
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"two_inputs", out.path()});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  check_same_parameters(out.path() + "/params.safetensors", reference_parameters());
}

TEST_CASE("DDP on 3 ranks: a tiny bucket cap still gives the single-process result") {
  // 64 rows do not split in 3: the reference trains on the 63 rows the ranks use.
  auto model = ddp::make_mlp(1);
  ddp::train(*model, 0, 63, 1, [](int, int, const std::function<void()>& step) { step(); });
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 3, {"equivalence", out.path(), "0.0001", "1"});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  check_same_parameters(out.path() + "/params.safetensors", model->state_dict());
}

TEST_CASE("DDP writes a Chrome trace with both ranks' backward and bucket all-reduces") {
  test::TempDir out;
  const std::string trace = out.path() + "/trace.json";
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"equivalence", out.path(), "0.001", "1", trace});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  const std::string json = test::read_text(trace);
  CHECK(json.find("\"traceEvents\"") != std::string::npos);
  CHECK(json.find("\"rank 0\"") != std::string::npos);
  CHECK(json.find("\"rank 1\"") != std::string::npos);
  CHECK(json.find("all_reduce bucket 0") != std::string::npos);
  CHECK(json.find("\"backward\"") != std::string::npos);
}

TEST_CASE("find_unused_parameters: an unused head keeps no gradient, the used one is averaged") {
  // The reference: the used head alone on the whole batch.
  Generator generator(5);
  nn::Linear used(10, 4, true, &generator);
  const auto [x, y] = ddp::batch(0);
  nn::functional::mse_loss(used(x), y).backward();

  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"unused", out.path(), "1"});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  const Tensor got = load_safetensors(out.path() + "/grads.safetensors").tensors.at("used.weight");
  CHECK(test::max_abs_diff(got, used.weight.grad()) < 1e-6);
}

TEST_CASE("without find_unused_parameters, a parameter with no gradient is an error naming it on every rank") {
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"unused", out.path(), "0"});
  INFO(result.summary());
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(result.exit_code(rank) == 3);
    CHECK(result.output(rank).find("'unused.weight'") != std::string::npos);
    CHECK(result.output(rank).find("find_unused_parameters") != std::string::npos);
  }
}

TEST_CASE("ranks that build different models fail at DDP construction, naming the difference") {
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"mismatch", out.path()});
  INFO(result.summary());
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(result.exit_code(rank) == 3);
    CHECK(result.output(rank).find("rank 0 has 'weight [4, 10] f32', rank 1 has 'weight [5, 10] f32'") !=
          std::string::npos);
  }
}

TEST_CASE("ranks that give DDP different options fail at construction, naming the option and each rank's value") {
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"mismatch_options", out.path()});
  INFO(result.summary());
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(result.exit_code(rank) == 3);
    CHECK(test::contains(result.output(rank),
                         "ranks disagree on ddp.find_unused_parameters: rank 0 has false, rank 1 has true"));
  }
}

TEST_CASE("DDP: after each training step every rank holds the buffers rank 0's forward computed") {
  // Reference: rank 0's rows alone, a training forward on batch 0, then one on batch 1.
  auto model = ddp::make_linear_batch_norm();
  const auto [begin, end] = ddp::shard(0, 2, ddp::kGlobalBatch);
  NoGradGuard no_grad;
  (*model)(ddp::batch(0).first.narrow(0, begin, end - begin));
  nn::StateDict after_step = model->state_dict();
  for (auto& [name, value] : after_step) value = value.clone();  // state_dict shares the storage
  (*model)(ddp::batch(1).first.narrow(0, begin, end - begin));
  const nn::StateDict after_no_grad = model->state_dict();

  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"buffers", out.path()});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  for (int rank = 0; rank < 2; ++rank)
    for (const auto& [when, expected] :
         {std::pair{"step", &std::as_const(after_step)}, std::pair{"no_grad", &after_no_grad}}) {
      CAPTURE(rank);
      CAPTURE(std::string(when));
      const SafetensorsFile got =
          load_safetensors(out.path() + "/rank" + std::to_string(rank) + "_" + when + ".safetensors");
      for (const char* name : {"1.running_mean", "1.running_var", "1.num_batches_tracked"}) {
        CAPTURE(name);
        // The same rows through the same kernels; 1e-6 allows another thread count's sum order.
        CHECK(test::max_abs_diff(got.tensors.at(name).to(DType::f64), expected->at(name).to(DType::f64)) < 1e-6);
      }
    }
}

TEST_CASE("a rank that dies mid-training makes the other fail in its next backward, naming the rank") {
  test::TempDir out;
  // The 60 s timeout is only a backstop: a closed connection is reported at once.
  const auto result =
      test::run_ranks(SG_DIST_WORKER_DDP, 2, {"rank_dies", out.path()}, {{"SG_DIST_TIMEOUT", "60"}}, 30);
  INFO(result.summary());
  CHECK(result.exit_code(1) == 9);
  CHECK(result.exit_code(0) == 3);
  CHECK(result.output(0).find("rank(s) 1 exited") != std::string::npos);
  CHECK(result.output(0).find("all_reduce") != std::string::npos);
}

TEST_CASE("SyncBatchNorm on 2 and 3 ranks equals BatchNorm on the whole batch") {
  // Reference: plain BatchNorm2d over all 8 rows, loss sum(out * G).
  nn::BatchNorm2d bn(ddp::kBnChannels);
  bn.to(DType::f64);
  {
    NoGradGuard no_grad;
    bn.weight.copy_(tensor(std::vector<double>{0.5, 1.5, -2.0}));
    bn.bias.copy_(tensor(std::vector<double>{0.1, -0.3, 0.7}));
  }
  const auto [x_all, g_all] = ddp::batch_norm_data();
  Tensor x = x_all.clone().requires_grad_();
  Tensor y = bn(x);
  (y * g_all).sum().backward();

  for (int world : {2, 3}) {
    CAPTURE(world);
    test::TempDir out;
    const auto result = test::run_ranks(SG_DIST_WORKER_DDP, world, {"syncbn", out.path()});
    INFO(result.summary());
    REQUIRE(result.all_succeeded());
    TensorList outs, grad_inputs;
    Tensor grad_weight = zeros({ddp::kBnChannels}, {DType::f64}), grad_bias = zeros({ddp::kBnChannels}, {DType::f64});
    for (int rank = 0; rank < world; ++rank) {
      const auto file = load_safetensors(out.path() + "/rank" + std::to_string(rank) + ".safetensors").tensors;
      outs.push_back(file.at("out"));
      grad_inputs.push_back(file.at("grad_input"));
      // Each rank's weight and bias gradients cover its rows; DDP would average them.
      grad_weight.add_(file.at("grad_weight"));
      grad_bias.add_(file.at("grad_bias"));
      CHECK(test::max_abs_diff(file.at("running_mean"), bn.running_mean) < 1e-12);
      CHECK(test::max_abs_diff(file.at("running_var"), bn.running_var) < 1e-12);
    }
    CHECK(test::max_abs_diff(cat(outs, 0), y.detach()) < 1e-12);
    CHECK(test::max_abs_diff(cat(grad_inputs, 0), x.grad()) < 1e-12);
    CHECK(test::max_abs_diff(grad_weight, bn.weight.grad()) < 1e-12);
    CHECK(test::max_abs_diff(grad_bias, bn.bias.grad()) < 1e-12);
  }
}

TEST_CASE("the Accelerator's f16 scaler under DDP: an overflow on one rank only makes every rank skip the step") {
  // From one rank's batch, carried to all by DDP's average; in a gradient outside DDP, carried by
  // the scaler's all-reduce of its found-inf flag.
  for (const char* scenario : {"scaler", "scaler_local"}) {
    CAPTURE(scenario);
    test::TempDir out;
    const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {scenario, out.path()});
    INFO(result.summary());
    REQUIRE(result.all_succeeded());
    for (int rank = 0; rank < 2; ++rank) CHECK(result.output(rank).find("skipped 1, scale 32768") != std::string::npos);
  }
}

TEST_CASE("with amp_diagnostics on 2 ranks a skipped step names the overflowing gradients and the rank they began on") {
  struct Expected {
    const char* scenario;
    std::vector<std::string> rank0, rank1;  // what each rank's output holds
  };
  const std::vector<Expected> expectations = {
      // Rank 1's batch holds an inf: its gradients are inf/NaN before DDP's all-reduce, rank 0's
      // after it. The first layer's weight gradient multiplies the inf input: inf or NaN, whatever
      // the rest does.
      {"scaler_diagnostics",
       {"amp: rank 0 skipped iteration 0 (scale 65536)\n"
        "  inf/NaN arrived from another rank through DDP's all-reduce: ",
        "0.weight ("},
       {"amp: rank 1 skipped iteration 0 (scale 65536)\n  inf/NaN began on this rank, before DDP's all-reduce: ",
        "0.weight ("}},
      // A parameter outside DDP, hence unnamed, overflows in rank 1's local gradient only.
      {"scaler_local_diagnostics",
       {"amp: rank 0 skipped iteration 0 (scale 65536): this rank's gradients were all finite; another rank's were "
        "not"},
       {"amp: rank 1 skipped iteration 0 (scale 65536)\n  inf/NaN in this rank's own gradients (not averaged by "
        "DDP): parameter 6 of SGD [1] (inf)\n"}}};
  for (const Expected& expected : expectations) {
    CAPTURE(expected.scenario);
    test::TempDir out;
    const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {expected.scenario, out.path()});
    INFO(result.summary());
    REQUIRE(result.all_succeeded());
    for (const std::string& part : expected.rank0) CHECK(test::contains(result.output(0), part));
    for (const std::string& part : expected.rank1) CHECK(test::contains(result.output(1), part));
    CHECK_FALSE(test::contains(result.output(0), "began on this rank"));
  }
}

TEST_CASE(
    "Accelerator on 2 ranks: gather_for_metrics returns the data set once, in order, state saved once loads "
    "everywhere") {
  test::TempDir out;
  const auto result = test::run_ranks(SG_DIST_WORKER_DDP, 2, {"accelerator", out.path()});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  for (int rank = 0; rank < 2; ++rank) CHECK(result.output(rank).find("accelerator ok") != std::string::npos);
}
