// dist::NonfiniteLossGuard (train/nonfinite_loss.h): the streak of non-finite losses that stops a
// run, every micro-batch of a step looked at, and the ranks of a DDP run stopping together
// (tests/dist_worker_nonfinite_loss.cpp). The apps' own runs are in tests/test_train_*.cpp.
#include <limits>

#include "dist_harness.h"
#include "helpers.h"
#include "train/nonfinite_loss.h"

using namespace sg;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("the guard stops at the max_steps-th non-finite loss in a row, and a finite loss ends a streak") {
  dist::NonfiniteLossGuard guard(3, "--max-nonfinite-steps");
  guard.observe(1.5, 1);
  guard.observe(kNaN, 2);
  guard.observe(kInf, 3);
  guard.observe(0.5, 4);  // the streak of 2 ends here
  guard.observe(kInf, 5);
  guard.observe(kNaN, 6);
  CHECK_THROWS_WITH_AS(guard.observe(kNaN, 7),
                       doctest::Contains("the loss went non-finite (inf) at step 5 and stayed so for 3 consecutive "
                                         "steps, to step 7, so training stopped (--max-nonfinite-steps 3; 0 never "
                                         "stops)"),
                       sg::Error);
}

TEST_CASE("with max_steps 0 the guard never stops, and a negative max_steps is refused by name") {
  dist::NonfiniteLossGuard guard(0, "TrainingArguments.max_nonfinite_steps");
  for (int64_t step = 1; step <= 20; ++step) CHECK_NOTHROW(guard.observe(kNaN, step));
  CHECK_THROWS_WITH_AS(dist::NonfiniteLossGuard(-1, "--max-nonfinite-steps"),
                       "--max-nonfinite-steps must be >= 0 (0: never stop), got -1", sg::Error);
}

TEST_CASE("a non-finite loss in any micro-batch of a step counts, though the step's last loss is finite") {
  // Gradient accumulation over 3 micro-batches: the NaN is in the first, whose gradients are in the sum.
  dist::NonfiniteLossGuard guard(2, "--max-nonfinite-steps");
  for (int64_t step = 1; step <= 2; ++step) {
    guard.add_micro_batch_loss(step == 1 ? kNaN : 0.25);
    guard.add_micro_batch_loss(step == 1 ? 0.5 : kInf);
    if (step == 1) {
      guard.observe(0.75, step);
    } else {
      CHECK_THROWS_WITH_AS(guard.observe(0.75, step),
                           doctest::Contains("the loss went non-finite (nan) at step 1 and stayed so for 2"),
                           sg::Error);
    }
  }
  // A step whose micro-batches were all finite ends a streak; the flag does not leak into it.
  dist::NonfiniteLossGuard fresh(2, "--max-nonfinite-steps");
  fresh.add_micro_batch_loss(kNaN);
  fresh.observe(1.0, 1);
  fresh.add_micro_batch_loss(1.0);
  fresh.observe(1.0, 2);
  CHECK_NOTHROW(fresh.observe(kNaN, 3));
}

TEST_CASE("under DDP every rank stops at the same step when one rank's loss goes non-finite, naming that rank") {
  // Rank 1's loss is NaN from step 4 on; with max_steps 2 rank 1 alone would stop at step 5 and
  // leave ranks 0 and 2 waiting in their next collective. All three must stop there instead.
  test::TempDir out;
  const test::RankResults result =
      test::run_ranks(SG_DIST_WORKER_NONFINITE_LOSS, 3, {"one_rank_diverges", out.path(), "1", "4", "2"});
  INFO(result.summary());
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(result.exit_code(rank) == 3);
    CHECK(test::contains(result.output(rank),
                         "the loss went non-finite (rank 1: nan) at step 4 and stayed so for 2 "
                         "consecutive steps, to step 5"));
    CHECK(!test::contains(result.output(rank), "trained 10 steps"));
  }
  // A clean run trains on.
  const test::RankResults clean =
      test::run_ranks(SG_DIST_WORKER_NONFINITE_LOSS, 2, {"one_rank_diverges", out.path(), "1", "11", "2"});
  INFO(clean.summary());
  CHECK(clean.all_succeeded());
  for (int rank = 0; rank < 2; ++rank) CHECK(test::contains(clean.output(rank), "trained 10 steps"));
}
