// SyncBatchNorm in one process: evaluation stays local, with or without a process group
// (tests/test_ddp.cpp checks training across real processes against BatchNorm on the whole batch).
#include "fake_process_group.h"
#include "helpers.h"

using namespace sg;

namespace {

// A BatchNorm2d of 3 channels with random affine parameters and running statistics.
std::shared_ptr<nn::BatchNorm2d> random_batch_norm(bool track_running_stats) {
  auto bn = std::make_shared<nn::BatchNorm2d>(3, 1e-5, 0.1, true, track_running_stats);
  NoGradGuard no_grad;
  bn->weight.copy_(randn({3}, {}, &test::rng()));
  bn->bias.copy_(randn({3}, {}, &test::rng()));
  if (track_running_stats) {
    bn->running_mean.copy_(randn({3}, {}, &test::rng()));
    bn->running_var.copy_(rand({3}, {}, &test::rng()) + 0.5);
  }
  return bn;
}

}  // namespace

TEST_CASE("SyncBatchNorm in eval mode needs no process group and equals BatchNorm2d in eval mode") {
  REQUIRE_FALSE(dist::is_initialized());
  for (bool track_running_stats : {true, false}) {  // without running statistics eval uses the batch's
    CAPTURE(track_running_stats);
    auto plain = random_batch_norm(track_running_stats);
    auto synced = std::make_shared<nn::BatchNorm2d>(3, 1e-5, 0.1, true, track_running_stats);
    synced->load_state_dict(plain->state_dict());
    REQUIRE(dist::convert_sync_batchnorm(*synced) == 1);
    plain->eval();
    synced->eval();
    const Tensor x = randn({4, 3, 5, 2}, {}, &test::rng()) * 2.0 + 0.5;
    CHECK(test::max_abs_diff((*synced)(x), (*plain)(x)) == 0);
  }
}

TEST_CASE("SyncBatchNorm on a group of 2 communicates in training only") {
  for (bool track_running_stats : {true, false}) {
    CAPTURE(track_running_stats);
    test::FakeProcessGroup group(0, 2);
    auto bn = random_batch_norm(track_running_stats);
    dist::convert_sync_batchnorm(*bn, &group);
    const Tensor x = randn({4, 3, 5, 2}, {}, &test::rng());
    bn->eval();
    (*bn)(x);
    CHECK(group.calls().empty());
    bn->train();
    (*bn)(x);
    CHECK_FALSE(group.calls().empty());  // the statistics of every rank's batch
  }
}
