// data::CharDataset and its vocabulary: the recipe's windows over a text, UTF-8 decoding, the
// fortunes corpus, and the errors a bad file gives.
#include <filesystem>
#include <fstream>

#include "data/char_dataset.h"
#include "dist_harness.h"
#include "helpers.h"

using namespace sg;
using data::CharDataset;

namespace {

// doctest::Contains of a std::string.
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace

TEST_CASE("CharDataset gives every window of block_size characters and the window shifted by one") {
  const CharDataset dataset("hello world", 4);
  CHECK(dataset.size() == 11 - 4);
  CHECK(dataset.vocabulary().to_utf8() == " dehlorw");  // sorted unique characters
  const data::Example first = dataset.get(0);           // "hell" -> "ello"
  CHECK(test::values(first.input) == std::vector<double>{3, 2, 4, 4});
  CHECK(test::values(first.target) == std::vector<double>{2, 4, 4, 5});
  CHECK(first.input.dtype() == DType::i64);
  const data::Example last = dataset.get(dataset.size() - 1);  // "worl" -> "orld"
  const std::vector<double> target = test::values(last.target);
  CHECK(dataset.vocabulary().decode(std::vector<int64_t>(target.begin(), target.end())) == U"orld");
  CHECK_THROWS_WITH_AS(dataset.get(7), doctest::Contains("index 7 is outside [0, 7)"), Error);
}

TEST_CASE("CharDataset counts Unicode code points of UTF-8 text, not bytes") {
  // "é" is 2 bytes, "€" 3, "𝄞" 4: 6 characters in 11 bytes.
  const std::string text = "aé€𝄞ab";
  const CharDataset dataset(text, 2);
  CHECK(dataset.num_characters() == 6);
  CHECK(dataset.size() == 4);
  CHECK(dataset.vocabulary().characters() == std::u32string(U"ab\u00e9\u20ac\U0001D11E"));
  CHECK(test::values(dataset.get(1).input) == std::vector<double>{2, 3});  // é €
  CHECK(data::encode_utf8(data::decode_utf8(text, "text")) == text);
}

TEST_CASE("CharDataset keeps the first floor(characters * truncate) characters, as the recipe") {
  const CharDataset dataset("abcdefghij", 2, 0.55);  // int(10 * 0.55) = 5: "abcde"
  CHECK(dataset.num_characters() == 5);
  CHECK(dataset.vocabulary().size() == 5);
  CHECK(dataset.size() == 3);
}

TEST_CASE("the vocabulary encodes and decodes through its UTF-8 form, and names unknown characters and ids") {
  const data::CharVocabulary vocabulary = data::CharVocabulary::of_text(U"baé\nb");
  const data::CharVocabulary restored = data::CharVocabulary::from_utf8(vocabulary.to_utf8());
  CHECK(restored.characters() == vocabulary.characters());
  CHECK(restored.encode(U"ab\n") == std::vector<int64_t>{1, 2, 0});
  CHECK_THROWS_WITH_AS(restored.encode(U"abz"),
                       doctest::Contains("character U+7A ('z') at position 2 is not in the vocabulary of 4"), Error);
  CHECK_THROWS_WITH_AS(restored.decode({0, 4}), doctest::Contains("id 4 at position 1 is outside [0, 4)"), Error);
}

TEST_CASE("CharDataset names the file that is missing, empty, too short or not UTF-8 (with the byte offset)") {
  test::TempDir dir;
  const std::string missing = dir.path() + "/missing.txt";
  CHECK_THROWS_WITH_AS(CharDataset::from_file(missing, 4), has(missing + " does not exist"), Error);
  const std::string empty = write_file(dir.path() + "/empty.txt", "");
  CHECK_THROWS_WITH_AS(CharDataset::from_file(empty, 4), has("CharDataset: " + empty + " is empty"), Error);
  const std::string short_file = write_file(dir.path() + "/short.txt", "abcd");
  CHECK_THROWS_WITH_AS(CharDataset::from_file(short_file, 4),
                       has(short_file + " has 4 characters, fewer than block_size + 1 = 5"), Error);
  CHECK_THROWS_WITH_AS(CharDataset::from_file(short_file, 3, 0.5),
                       has(short_file + " has 2 characters after truncate 0.5"), Error);
  const std::string latin1 = write_file(dir.path() + "/latin1.txt", "caf\xe9 au lait");
  CHECK_THROWS_WITH_AS(CharDataset::from_file(latin1, 4),
                       has(latin1 + ": invalid UTF-8 at byte offset 4 (expected a continuation byte)"), Error);
  CHECK_THROWS_WITH_AS(data::decode_utf8("ab\xe2\x82", "cut"),
                       doctest::Contains("cut: invalid UTF-8 at byte offset 2 (a character cut short"), Error);
  CHECK_THROWS_WITH_AS(data::decode_utf8("a\xc0\xaf", "overlong"),
                       doctest::Contains("overlong: invalid UTF-8 at byte offset 1"), Error);
  CHECK_THROWS_WITH_AS(data::decode_utf8("\xed\xa0\x80", "surrogate"),
                       doctest::Contains("U+D800 is overlong, a surrogate"), Error);
  CHECK_THROWS_WITH_AS(data::decode_utf8("\xff", "lead"), doctest::Contains("byte 0xff cannot start a character"),
                       Error);
  CHECK_THROWS_WITH_AS(CharDataset("abc", 0), doctest::Contains("block_size must be >= 1, got 0"), Error);
  CHECK_THROWS_WITH_AS(CharDataset("abc", 1, 0.0), doctest::Contains("truncate must lie in (0, 1], got 0"), Error);
}

TEST_CASE("the fortunes corpus joins the plain files in name order, skips .dat and .u8, and resolves overstriking") {
  test::TempDir dir;
  write_file(dir.path() + "/b", "second\n%\n");
  write_file(dir.path() + "/a", "_\bb_\bo_\bl_\bd and X\bX\n%\n");  // underlined "bold", bold X
  write_file(dir.path() + "/a.dat", std::string("\0\0\0\x02", 4));
  std::filesystem::create_symlink(dir.path() + "/a", dir.path() + "/a.u8");
  CHECK(data::fortunes_corpus(dir.path()) == "bold and X\n%\nsecond\n%\n");
  CHECK_THROWS_WITH_AS(data::fortunes_corpus(dir.path() + "/none"),
                       doctest::Contains("does not exist (install the Debian package fortunes)"), Error);
}

TEST_CASE("the installed fortunes make a corpus of about 2.5 MB with no backspaces") {
  if (!std::filesystem::is_directory(data::kFortunesDirectory)) {
    MESSAGE("skipped: ", data::kFortunesDirectory, " is absent (install the Debian package fortunes)");
    return;
  }
  const std::string corpus = data::fortunes_corpus();
  CHECK(corpus.size() > 2'000'000);
  CHECK(corpus.size() < 3'000'000);
  CHECK(corpus.find('\b') == std::string::npos);
  const CharDataset dataset(corpus, 128, 0.02, "fortunes");
  CHECK(dataset.vocabulary().size() > 60);
}
