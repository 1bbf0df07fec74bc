#include "data/char_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "core/factory.h"

namespace sg::data {

namespace {

std::string hex_code_point(char32_t c) {
  std::ostringstream out;
  out << "U+" << std::uppercase << std::hex << static_cast<uint32_t>(c);
  return out.str();
}

std::string read_file(const std::string& path) {
  std::error_code error;
  SG_CHECK(std::filesystem::is_regular_file(path, error), "CharDataset: ", path, " does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  SG_CHECK(in, "CharDataset: cannot open ", path, ": ", std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SG_CHECK(!in.bad(), "CharDataset: reading ", path, " failed");
  return bytes;
}

}  // namespace

std::u32string decode_utf8(const std::string& bytes, const std::string& source) {
  std::u32string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    int length = 0;
    char32_t c = 0, minimum = 0;
    if (lead < 0x80) length = 1, c = lead;
    else if ((lead & 0xE0) == 0xC0) length = 2, c = lead & 0x1F, minimum = 0x80;
    else if ((lead & 0xF0) == 0xE0) length = 3, c = lead & 0x0F, minimum = 0x800;
    else if ((lead & 0xF8) == 0xF0) length = 4, c = lead & 0x07, minimum = 0x10000;
    SG_CHECK(length > 0, source, ": invalid UTF-8 at byte offset ", i, " (byte 0x", std::hex,
             static_cast<unsigned>(lead), std::dec, " cannot start a character)");
    SG_CHECK(i + static_cast<size_t>(length) <= n, source, ": invalid UTF-8 at byte offset ", i,
             " (a character cut short by the end of the text)");
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + static_cast<size_t>(k)]);
      SG_CHECK((next & 0xC0) == 0x80, source, ": invalid UTF-8 at byte offset ", i + static_cast<size_t>(k),
               " (expected a continuation byte)");
      c = (c << 6) | (next & 0x3F);
    }
    SG_CHECK(c >= minimum && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF), source, ": invalid UTF-8 at byte offset ",
             i, " (", hex_code_point(c), " is overlong, a surrogate or beyond U+10FFFF)");
    out.push_back(c);
    i += static_cast<size_t>(length);
  }
  return out;
}

std::string encode_utf8(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : text) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

// ---- CharVocabulary ----

CharVocabulary::CharVocabulary(std::u32string characters) : characters_(std::move(characters)) {
  SG_CHECK(!characters_.empty(), "CharVocabulary: no characters");
  for (size_t i = 1; i < characters_.size(); ++i)
    SG_CHECK(characters_[i - 1] < characters_[i], "CharVocabulary: characters must be sorted and unique, but ",
             hex_code_point(characters_[i]), " follows ", hex_code_point(characters_[i - 1]));
}

CharVocabulary CharVocabulary::of_text(const std::u32string& text) {
  std::u32string characters = text;
  std::sort(characters.begin(), characters.end());
  characters.erase(std::unique(characters.begin(), characters.end()), characters.end());
  return CharVocabulary(std::move(characters));
}

std::vector<int64_t> CharVocabulary::encode(const std::u32string& text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto it = std::lower_bound(characters_.begin(), characters_.end(), text[i]);
    SG_CHECK(it != characters_.end() && *it == text[i], "CharVocabulary: character ", hex_code_point(text[i]), " ('",
             encode_utf8(std::u32string(1, text[i])), "') at position ", i, " is not in the vocabulary of ", size(),
             " characters");
    ids[i] = it - characters_.begin();
  }
  return ids;
}

std::u32string CharVocabulary::decode(const std::vector<int64_t>& ids) const {
  std::u32string text(ids.size(), U' ');
  for (size_t i = 0; i < ids.size(); ++i) {
    SG_CHECK(ids[i] >= 0 && ids[i] < size(), "CharVocabulary: id ", ids[i], " at position ", i, " is outside [0, ",
             size(), ")");
    text[i] = characters_[static_cast<size_t>(ids[i])];
  }
  return text;
}

// ---- CharDataset ----

namespace {

// The first floor(characters * truncate) characters, checked long enough for one example.
std::u32string truncated_text(const std::string& text, int64_t block_size, double truncate, const std::string& source) {
  SG_CHECK(block_size >= 1, "CharDataset: block_size must be >= 1, got ", block_size, " (", source, ")");
  SG_CHECK(truncate > 0 && truncate <= 1, "CharDataset: truncate must lie in (0, 1], got ", truncate, " (", source,
           ")");
  SG_CHECK(!text.empty(), "CharDataset: ", source, " is empty");
  std::u32string characters = decode_utf8(text, source);
  characters.resize(static_cast<size_t>(static_cast<double>(characters.size()) * truncate));
  std::ostringstream truncated;
  if (truncate < 1) truncated << " after truncate " << truncate;
  SG_CHECK(static_cast<int64_t>(characters.size()) >= block_size + 1, "CharDataset: ", source, " has ",
           characters.size(), " characters", truncated.str(), ", fewer than block_size + 1 = ", block_size + 1);
  return characters;
}

}  // namespace

CharDataset::CharDataset(const std::string& text, int64_t block_size, double truncate, const std::string& source)
    : CharDataset(truncated_text(text, block_size, truncate, source), block_size) {}

CharDataset::CharDataset(const std::u32string& characters, int64_t block_size)
    : block_size_(block_size),
      vocabulary_(CharVocabulary::of_text(characters)),
      ids_(vocabulary_.encode(characters)) {}

std::shared_ptr<CharDataset> CharDataset::from_file(const std::string& path, int64_t block_size, double truncate) {
  return std::make_shared<CharDataset>(read_file(path), block_size, truncate, path);
}

Example CharDataset::get(int64_t index) const {
  SG_CHECK(index >= 0 && index < size(), "CharDataset: index ", index, " is outside [0, ", size(), ")");
  const auto first = ids_.begin() + index;
  const std::vector<int64_t> input(first, first + block_size_), target(first + 1, first + block_size_ + 1);
  return {tensor(input, {block_size_}), tensor(target, {block_size_})};
}

// ---- the fortunes corpus ----

std::string fortunes_corpus(const std::string& directory) {
  namespace fs = std::filesystem;
  std::error_code error;
  SG_CHECK(fs::is_directory(directory, error), "fortunes_corpus: ", directory,
           " does not exist (install the Debian package fortunes)");
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const fs::path& path = entry.path();
    if (entry.is_symlink() || !entry.is_regular_file() || path.extension() == ".dat" || path.extension() == ".u8")
      continue;
    files.push_back(path.string());
  }
  SG_CHECK(!files.empty(), "fortunes_corpus: no fortune files in ", directory,
           " (install the Debian package fortunes)");
  std::sort(files.begin(), files.end());
  std::u32string corpus;
  for (const std::string& file : files) {
    for (const char32_t c : decode_utf8(read_file(file), file)) {
      if (c != U'\b') corpus.push_back(c);
      else if (!corpus.empty()) corpus.pop_back();  // overstriking: "_\bx" and "x\bx" print one x
    }
  }
  return encode_utf8(corpus);
}

}  // namespace sg::data
