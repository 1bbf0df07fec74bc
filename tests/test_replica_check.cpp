// DDP's replica-drift guard (Note [Replicas stay identical] in dist/replica_check.h): the hash on
// one process, then planted bugs on 2 and 3 ranks that the check must name, and a clean run.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "dist/replica_check.h"
#include "dist_harness.h"
#include "helpers.h"

using namespace sg;

namespace {

uint64_t hash_text(const std::string& text) { return dist::hash_bytes(text.data(), text.size()); }

Tensor f32_from_bits(uint32_t bits) {
  Tensor t = empty({1}, {DType::f32});
  std::memcpy(t.data_ptr<float>(), &bits, sizeof bits);
  return t;
}

// Both ranks stop with exit code 3 (an sg::Error), in time, and print every part of the message.
void check_every_rank_fails_with(const test::RankResults& result, const std::vector<std::string>& parts) {
  INFO(result.summary());
  REQUIRE(!result.timed_out);
  for (int rank = 0; rank < static_cast<int>(result.exit_codes.size()); ++rank) {
    CHECK(result.exit_code(rank) == 3);
    for (const std::string& part : parts) CHECK(test::contains(result.output(rank), part));
  }
}

}  // namespace

TEST_CASE("hash_bytes is XXH64 with seed 0, so it gives the same value on every machine and in every process") {
  // The reference values come from the xxHash library (libxxhash 0.8.1, XXH64(data, size, 0)).
  CHECK(hash_text("") == 0xEF46DB3751D8E999ULL);
  CHECK(hash_text("a") == 0xD24EC4F1A98C6E5BULL);
  CHECK(hash_text("abc") == 0x44BC2CF5AD770999ULL);
  // 39 bytes: the four 32-byte lanes, one 8-byte word, no 4-byte word, 7 single bytes.
  CHECK(hash_text("Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1ULL);
}

TEST_CASE("hash_bits sees every bit: -0.0 and 0.0, NaN payloads and one flipped bit give other hashes") {
  CHECK(dist::hash_bits(f32_from_bits(0x00000000)) != dist::hash_bits(f32_from_bits(0x80000000)));  // 0.0, -0.0
  CHECK(dist::hash_bits(f32_from_bits(0x7FC00000)) != dist::hash_bits(f32_from_bits(0x7FC00001)));  // two NaNs
  Generator generator(5);
  const Tensor weights = randn({257, 33}, {}, &generator);  // not a multiple of 32 bytes: every tail path
  const uint64_t hash = dist::hash_bits(weights);
  for (int64_t element : {int64_t(0), int64_t(4000), weights.numel() - 1}) {
    Tensor flipped = weights.clone();
    uint32_t bits;
    std::memcpy(&bits, flipped.data_ptr<float>() + element, sizeof bits);
    bits ^= 1u;  // the lowest mantissa bit: a change far below any tolerance
    std::memcpy(flipped.data_ptr<float>() + element, &bits, sizeof bits);
    CHECK(dist::hash_bits(flipped) != hash);
  }
}

TEST_CASE("hash_bits depends on the order of the elements and is stable: a view hashes as its copy") {
  Generator generator(6);
  const Tensor matrix = randn({16, 24}, {}, &generator);
  const Tensor transposed = matrix.t();
  CHECK(dist::hash_bits(transposed) == dist::hash_bits(transposed.contiguous()));
  CHECK(dist::hash_bits(transposed) != dist::hash_bits(matrix));  // the same values, in another order
  CHECK(dist::hash_bits(matrix) == dist::hash_bits(matrix.clone()));
  CHECK(dist::hash_bits(matrix) == dist::hash_bytes(matrix.data_ptr<float>(), 16 * 24 * sizeof(float)));
}

TEST_CASE("Optimizer::named_state names each state tensor by its field and its parameter's name") {
  Generator generator(7);
  nn::Linear layer(3, 2, true, &generator);
  optim::Adam optimizer(layer.parameters(), {.lr = 0.1});
  CHECK(optimizer.named_state(layer.named_parameters()).empty());  // no state before the first step
  nn::functional::mse_loss(layer(randn({4, 3}, {}, &generator)), randn({4, 2}, {}, &generator)).backward();
  optimizer.step();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : optimizer.named_state(layer.named_parameters())) names.push_back(name);
  CHECK(names == std::vector<std::string>{"optimizer state step of weight", "optimizer state exp_avg of weight",
                                          "optimizer state exp_avg_sq of weight", "optimizer state step of bias",
                                          "optimizer state exp_avg of bias", "optimizer state exp_avg_sq of bias"});
  CHECK(optimizer.named_state({}).front().first == "optimizer state step of parameter 0");
}

TEST_CASE("a clean DDP run checked after every step, with no_sync micro-batches and Adam, passes on 2 ranks") {
  test::TempDir out;
  const test::RankResults result = test::run_ranks(SG_DIST_WORKER_REPLICA_CHECK, 2, {"clean", out.path()});
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  for (int rank = 0; rank < 2; ++rank)
    CHECK(test::contains(result.output(rank), "rank " + std::to_string(rank) + ": the replicas agree after step 4"));
}

TEST_CASE("the replica check names a parameter whose gradient DDP never averaged on one rank, and the step") {
  test::TempDir out;
  check_every_rank_fails_with(
      test::run_ranks(SG_DIST_WORKER_REPLICA_CHECK, 2, {"unaveraged_gradient", out.path()}),
      {"DistributedDataParallel: replica check after step 1 (check_replicas_every = 1; they agreed when DDP was built)",
       "module.4.bias is the first tensor that differs: rank 0 holds 0x", ", rank 1 differs with 0x"});
  // On 3 ranks the two that agree are named together.
  check_every_rank_fails_with(
      test::run_ranks(SG_DIST_WORKER_REPLICA_CHECK, 3, {"unaveraged_gradient", out.path()}),
      {"module.4.bias is the first tensor that differs: ranks 0, 2 agree on 0x", ", rank 1 differs with 0x"});
}

TEST_CASE("the replica check names BatchNorm statistics kept per rank with broadcast_buffers off") {
  test::TempDir out;
  check_every_rank_fails_with(test::run_ranks(SG_DIST_WORKER_REPLICA_CHECK, 2, {"local_buffers", out.path()}),
                              {"replica check after step 1 ", "module.1.running_mean is the first tensor that differs",
                               "1 more differs: module.1.running_var."});
}

TEST_CASE("the replica check catches a rank that stepped after a no_sync backward, within its K steps") {
  test::TempDir out;
  check_every_rank_fails_with(
      test::run_ranks(SG_DIST_WORKER_REPLICA_CHECK, 2, {"no_sync_step", out.path()}),
      {"replica check after step 4 (check_replicas_every = 2; they agreed after step 2)",
       "module.0.weight is the first tensor that differs: rank 0 holds 0x",
       "5 more differ: module.0.bias, module.2.weight, module.2.bias, module.4.weight and 1 other(s)."});
}

TEST_CASE("Accelerator::save_state refuses on every rank a snapshot whose optimizer state differs between ranks") {
  test::TempDir out;
  check_every_rank_fails_with(
      test::run_ranks(SG_DIST_WORKER_REPLICA_CHECK, 2, {"snapshot", out.path()}),
      {"DistributedDataParallel::check_replicas after step 2: the replicas differ. optimizer state exp_avg of "
       "module.2.weight is the first tensor that differs: rank 0 holds 0x"});
  CHECK(!std::filesystem::exists(out.path() + "/state.safetensors"));
}
