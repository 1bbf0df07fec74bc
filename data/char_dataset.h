#pragma once
// defines: data::CharDataset, data::CharVocabulary, decode_utf8, encode_utf8, fortunes_corpus — the
//          character-level data set of PyTorch's minGPT-ddp example (mingpt/char_dataset.py) over
//          UTF-8 text, and the default corpus it trains on here.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace sg::data {

// The Unicode code points of UTF-8 `bytes`; invalid UTF-8 (a bad lead or continuation byte, a
// truncated sequence, an overlong form, a surrogate, a value above U+10FFFF) is an sg::Error naming
// `source` and the byte offset.
std::u32string decode_utf8(const std::string& bytes, const std::string& source);
std::string encode_utf8(const std::u32string& text);

// The characters of a text, sorted by code point: id i is the i-th character (the recipe's
// stoi / itos). Stored with a model as to_utf8(), so generation decodes exactly as training encoded.
class CharVocabulary {
public:
  // `characters` must be sorted and unique.
  explicit CharVocabulary(std::u32string characters);
  static CharVocabulary of_text(const std::u32string& text);
  static CharVocabulary from_utf8(const std::string& characters) {
    return CharVocabulary(decode_utf8(characters, "vocabulary"));
  }

  int64_t size() const { return static_cast<int64_t>(characters_.size()); }
  const std::u32string& characters() const { return characters_; }
  std::string to_utf8() const { return encode_utf8(characters_); }
  // A character outside the vocabulary is an sg::Error naming it and its position in `text`.
  std::vector<int64_t> encode(const std::u32string& text) const;
  // An id outside [0, size()) is an sg::Error naming it.
  std::u32string decode(const std::vector<int64_t>& ids) const;

private:
  std::u32string characters_;
};

// Example i is (ids[i .. i + block_size), ids[i + 1 .. i + block_size + 1)) as i64 tensors
// [block_size]: every window of the text, predicting each next character. size() = characters - block_size.
class CharDataset : public Dataset {
public:
  // `text` is UTF-8; only its first floor(characters * truncate) characters are kept, as the
  // recipe's data[:int(len(data) * truncate)]. `source` names the text in errors (a file name).
  // Empty text, truncate outside (0, 1], block_size < 1, or fewer than block_size + 1 characters
  // after truncation are sg::Errors naming `source`.
  CharDataset(const std::string& text, int64_t block_size, double truncate = 1.0, const std::string& source = "<text>");
  // The UTF-8 file at `path`; a missing or unreadable file is an sg::Error naming it.
  static std::shared_ptr<CharDataset> from_file(const std::string& path, int64_t block_size, double truncate = 1.0);

  int64_t size() const override { return static_cast<int64_t>(ids_.size()) - block_size_; }
  Example get(int64_t index) const override;

  int64_t block_size() const { return block_size_; }
  int64_t num_characters() const { return static_cast<int64_t>(ids_.size()); }
  const CharVocabulary& vocabulary() const { return vocabulary_; }

private:
  CharDataset(const std::u32string& characters, int64_t block_size);

  int64_t block_size_;
  CharVocabulary vocabulary_;
  std::vector<int64_t> ids_;  // the text, encoded
};

// The English fortunes of Debian's `fortunes` package as one text: every plain file of
// `directory` (not the .dat indexes, not the .u8 links) in name order, each with its backspace
// overstriking resolved (a backspace erases the character before it, as `col -b` shows it).
// About 2.5 MB. A missing or empty directory is an sg::Error naming it and the package.
inline constexpr const char* kFortunesDirectory = "/usr/share/games/fortunes";
std::string fortunes_corpus(const std::string& directory = kFortunesDirectory);

}  // namespace sg::data
