// dist::RunFingerprint and the message dist::disagreements writes from the ranks' fingerprints
// (the multi-process checks are in tests/test_accelerator.cpp and tests/test_ddp.cpp).
#include "dist/run_fingerprint.h"
#include "helpers.h"

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
