// dist::RunFingerprint, the message dist::disagreements writes from the ranks' fingerprints and
// a schedule's fingerprint (the multi-process checks are in tests/test_accelerator.cpp and tests/test_ddp.cpp).
#include "dist/run_fingerprint.h"
#include "helpers.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "train/run_settings.h"

using namespace sg;

namespace {

dist::RunFingerprint fingerprint(const std::vector<std::pair<std::string, std::string>>& fields) {
  dist::RunFingerprint result;
  for (const auto& [name, value] : fields) result.add(name, value);
  return result;
}

}  // namespace

TEST_CASE("a fingerprint writes numbers as the shortest text that reads back, and round-trips as text") {
  dist::RunFingerprint settings;
  settings.add("lr", 0.001);
  settings.add("eps", 1e-8);
  settings.add("batch_size", int64_t{64});
  settings.add("seed", uint64_t{18446744073709551615u});
  settings.add("shuffle", true);
  settings.add("type", "Adam");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"lr", "0.001"},     {"eps", "1e-08"}, {"batch_size", "64"}, {"seed", "18446744073709551615"},
      {"shuffle", "true"}, {"type", "Adam"}};
  CHECK(settings.fields() == expected);
  CHECK(dist::RunFingerprint::from_text(settings.to_text()).fields() == expected);
  CHECK_THROWS_WITH_AS(settings.add("lr", 0.01), doctest::Contains("'lr' is already there"), Error);
}

TEST_CASE("ranks that agree have no disagreements") {
  const auto settings = fingerprint({{"optimizer.lr", "0.001"}, {"loaders[0].seed", "5"}});
  CHECK(dist::disagreements({settings, settings, settings}).empty());
}

TEST_CASE("each differing field is one line naming every rank's value, ranks with one value listed together") {
  const auto usual = fingerprint({{"optimizer.lr", "0.001"}, {"loaders[0].batch_size", "64"}});
  const auto other_lr = fingerprint({{"optimizer.lr", "0.01"}, {"loaders[0].batch_size", "64"}});
  const auto other_batch = fingerprint({{"optimizer.lr", "0.001"}, {"loaders[0].batch_size", "32"}});
  CHECK(dist::disagreements({usual, other_lr}) ==
        std::vector<std::string>{"ranks disagree on optimizer.lr: rank 0 has 0.001, rank 1 has 0.01"});
  CHECK(dist::disagreements({usual, usual, usual, other_batch, usual, other_lr}) ==
        std::vector<std::string>{"ranks disagree on optimizer.lr: ranks 0-4 have 0.001, rank 5 has 0.01",
                                 "ranks disagree on loaders[0].batch_size: ranks 0-2, 4-5 have 64, rank 3 has 32"});
}

TEST_CASE("a value that is not one word is quoted with its control characters escaped, a long one cut") {
  const auto a = fingerprint({{"vocabulary", "\n !ab"}});
  const auto b = fingerprint({{"vocabulary", "\n !ac"}});
  CHECK(dist::disagreements({a, b}) ==
        std::vector<std::string>{R"(ranks disagree on vocabulary: rank 0 has "\n !ab", rank 1 has "\n !ac")"});
  const auto long_a = fingerprint({{"text", std::string(100, 'x')}});
  const auto long_b = fingerprint({{"text", std::string(100, 'y')}});
  CHECK(dist::disagreements({long_a, long_b}) ==
        std::vector<std::string>{"ranks disagree on text: rank 0 has \"" + std::string(80, 'x') +
                                 "\"... (100 bytes), rank 1 has \"" + std::string(80, 'y') + "\"... (100 bytes)"});
}

TEST_CASE("fields only some ranks have are listed only when no field they share differs") {
  const auto sgd = fingerprint({{"optimizer.type", "SGD"}, {"optimizer.lr", "0.1"}, {"optimizer.momentum", "0.9"}});
  const auto adam = fingerprint({{"optimizer.type", "Adam"}, {"optimizer.lr", "0.1"}, {"optimizer.beta1", "0.9"}});
  CHECK(dist::disagreements({sgd, adam}) ==
        std::vector<std::string>{"ranks disagree on optimizer.type: rank 0 has SGD, rank 1 has Adam"});
  const auto fewer = fingerprint({{"optimizer.type", "SGD"}, {"optimizer.lr", "0.1"}});
  CHECK(dist::disagreements({sgd, fewer}) ==
        std::vector<std::string>{"ranks disagree on optimizer.momentum: rank 0 has 0.9, rank 1 has no such setting"});
}

TEST_CASE("a schedule's fingerprint is its lrs at a ladder of steps, per group, and a factor that throws is compared") {
  Tensor weight = zeros({2}).requires_grad_(), bias = zeros({2}).requires_grad_();
  optim::SGD one_group({weight, bias}, {.lr = 0.1});
  optim::WarmupCosineLR warm_20(one_group, 20, 1000), warm_21(one_group, 21, 1000);
  const dist::RunFingerprint a = dist::scheduler_settings(warm_20), b = dist::scheduler_settings(warm_21);
  REQUIRE(a.fields().size() == 20);  // steps 0, 1, 2, 5, ... 10^6
  CHECK(a.fields().front().first == "scheduler.lr_at_step_0");
  CHECK(a.fields().back().first == "scheduler.lr_at_step_1000000");
  CHECK(a.fields()[6].first == "scheduler.lr_at_step_50");
  CHECK(a.fields()[6].second != b.fields()[6].second);              // inside both warm-ups
  CHECK(a.fields().back().second == b.fields().back().second);      // both at their floor
  CHECK(dist::scheduler_settings(warm_20).fields() == a.fields());  // reading it moves nothing

  optim::SGD two_groups({weight}, {.lr = 0.1});
  two_groups.add_param_group({bias}, optim::SGDOptions{.lr = 0.5});
  optim::LambdaLR refuses_late(two_groups, [](int64_t step) {
    SG_CHECK(step <= 100, "no factor for step ", step);
    return 1.0 / static_cast<double>(step + 1);
  });
  const dist::RunFingerprint groups = dist::scheduler_settings(refuses_late);
  REQUIRE(groups.fields().size() == 40);
  CHECK(groups.fields()[1] == std::pair<std::string, std::string>{"scheduler.param_groups[0].lr_at_step_1", "0.05"});
  CHECK(groups.fields()[21].first == "scheduler.param_groups[1].lr_at_step_1");
  CHECK(groups.fields()[21].second == "0.25");
  CHECK(groups.fields()[7].second == "0.0009900990099009901");  // 0.1 / 101
  CHECK(groups.fields()[8].second.starts_with("throws: no factor for step 200"));
}
