// `sgrun --verify N` (launch/data_parallel_verification.h): the comparison of two runs' states, and
// the whole check on a small program with one planted cause of disagreement per mode
// (tests/verify_probe.cpp).
#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>

#include "dist_harness.h"
#include "helpers.h"
#include "launch/data_parallel_picture.h"
#include "launch/data_parallel_verification.h"
#include "train/data_parallel_check.h"

using namespace sg;

namespace {

using State = std::map<std::string, Tensor>;

// A copy of an f32 `t` with `by` added to one element.
Tensor nudged(const Tensor& t, int64_t element, double by) {
  Tensor copy = t.clone();
  copy.data_ptr<float>()[element] += static_cast<float>(by);
  return copy;
}

}  // namespace

TEST_CASE("the --verify picture draws a bar per tensor, red where it differs, and the tolerance line") {
  std::vector<dist::TensorDrift> drifts{{"fc.weight", 1e-9, 1e-2, false}, {"bn.running_mean", 1e-3, 1e-2, true}};
  const std::string svg = dist::data_parallel_svg(drifts, 2, 5);
  CHECK(test::contains(svg, ">fc.weight</text>"));
  CHECK(test::contains(svg, ">bn.running_mean</text>"));
  CHECK(test::contains(svg, "fill=\"#59a14f\"><title>fc.weight"));
  CHECK(test::contains(svg, "fill=\"#e15759\"><title>bn.running_mean"));
  CHECK(test::contains(svg, ">tolerance</text>"));
  CHECK(test::contains(svg, ">1e-3</text>"));
}

TEST_CASE("compare_data_parallel passes differences at the rounding level and flags one above it") {
  const Tensor initial = randn({40}, {}, &test::rng());
  const Tensor update = randn({40}, {}, &test::rng()) * 0.01;  // the steps moved every element ~0.01
  const Tensor trained = initial + update;
  const double largest_update = update.abs().max().item();
  const State start{{"model.w", initial}};

  SUBCASE("rounding: a difference of 1e-5 of the update agrees") {
    const auto drifts = dist::compare_data_parallel(start, {{"model.w", nudged(trained, 3, 1e-5 * largest_update)}},
                                                    {{"model.w", trained}});
    REQUIRE(drifts.size() == 1);
    CHECK(drifts[0].name == "w");
    CHECK(drifts[0].largest_update == doctest::Approx(largest_update).epsilon(1e-5));
    CHECK_FALSE(drifts[0].differs);
    CHECK(test::contains(dist::data_parallel_report(drifts, 2, 5), "Every tensor agrees"));
  }
  SUBCASE("a difference of 1e-2 of the update is flagged, and the report names the usual causes") {
    const auto drifts = dist::compare_data_parallel(start, {{"model.w", nudged(trained, 3, 1e-2 * largest_update)}},
                                                    {{"model.w", trained}});
    CHECK(drifts[0].differs);
    const std::string report = dist::data_parallel_report(drifts, 4, 5);
    CHECK(test::contains(report, "DIFFERS"));
    CHECK(test::contains(report, "BatchNorm without SyncBatchNorm"));
    CHECK(test::contains(report, "take 1/4 of the one-rank step"));
  }
  SUBCASE("a tensor that hardly moved may differ in its last bits") {
    const Tensor still = initial + update * 1e-9;
    const auto drifts = dist::compare_data_parallel(start, {{"model.w", nudged(still, 0, 1e-8)}}, {{"model.w", still}});
    CHECK_FALSE(drifts[0].differs);
  }
  SUBCASE("a tensor missing from a run, or reshaped, is an error naming it") {
    CHECK_THROWS_WITH(dist::compare_data_parallel(start, {}, {{"model.w", trained}}),
                      doctest::Contains("many-rank run saved no tensor model.w"));
    CHECK_THROWS_WITH(
        dist::compare_data_parallel(start, {{"model.w", trained}}, {{"model.w", trained.reshape({4, 10})}}),
        doctest::Contains("has shape [4, 10] after the one-rank run, [40] initially"));
  }
}

// A lookup of these variables alone, for data_parallel_check_from_environment.
dist::VariableLookup variables(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    return found == values.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
}

TEST_CASE("the worker's half reads SG_VERIFY_* and names a malformed variable") {
  CHECK_FALSE(dist::data_parallel_check_from_environment(variables({})).active());
  const dist::DataParallelCheck check = dist::data_parallel_check_from_environment(
      variables({{"SG_VERIFY_STEPS", "5"}, {"SG_VERIFY_BATCH_SCALE", "2"}, {"SG_VERIFY_OUTPUT", "/tmp/x"}}));
  CHECK(check.active());
  CHECK(check.steps == 5);
  CHECK(check.batch_scale == 2);
  CHECK(check.output == "/tmp/x");
  CHECK_THROWS_WITH(dist::data_parallel_check_from_environment(
                        variables({{"SG_VERIFY_STEPS", "-1"}, {"SG_VERIFY_OUTPUT", "/tmp/x"}})),
                    doctest::Contains("SG_VERIFY_STEPS='-1' is not a positive whole number"));
  CHECK_THROWS_WITH(dist::data_parallel_check_from_environment(variables({{"SG_VERIFY_STEPS", "3"}})),
                    doctest::Contains("SG_VERIFY_OUTPUT"));
}

#ifdef SG_SGRUN
namespace {

// The report's line for `tensor`, or "" when it has none.
std::string row_of(const std::string& report, const std::string& tensor) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with(tensor + " ")) return line;
  return "";
}

test::RankResults verify(const std::string& mode) {
  return test::run_ranks(SG_SGRUN, 1, {"--standalone", "--verify", "2", "--verify-steps", "4", SG_VERIFY_PROBE, mode},
                         {}, 120);
}

}  // namespace

TEST_CASE("sgrun --verify 2 passes a program whose 2-rank steps are its large-batch steps") {
  for (const char* mode : {"sgd", "sync-bn"}) {
    CAPTURE(mode);
    const test::RankResults result = verify(mode);
    INFO(result.summary());
    CHECK(result.exit_code(0) == 0);
    CHECK(test::contains(result.output(0), "Every tensor agrees"));
    CHECK_FALSE(test::contains(result.output(0), "DIFFERS"));
  }
}

TEST_CASE("sgrun --verify 2 flags BatchNorm without SyncBN, a summed loss and rank-blind dropout") {
  // mode -> a tensor that must be flagged
  const std::map<std::string, std::string> planted{
      {"bn", "1.running_mean"}, {"summed-loss", "0.weight"}, {"dropout", "0.weight"}};
  for (const auto& [mode, tensor] : planted) {
    CAPTURE(mode);
    const test::RankResults result = verify(mode);
    INFO(result.summary());
    CHECK(result.exit_code(0) == 1);
    CHECK(test::contains(result.output(0), "more than float reordering explains"));
    CHECK(test::contains(row_of(result.output(0), tensor), "DIFFERS"));
  }
}

TEST_CASE("sgrun --verify refuses to compare runs that started from different weights") {
  const test::RankResults result = verify("world-seeded");
  INFO(result.summary());
  CHECK(result.exit_code(0) == 1);
  CHECK(test::contains(result.output(0), "the two runs started from different states"));
}
#endif
