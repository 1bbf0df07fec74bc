#include "train/numbered_checkpoints.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.h"

namespace sg::dist {

namespace fs = std::filesystem;

NumberedCheckpoints::NumberedCheckpoints(std::string parent, std::string prefix, std::string owner)
    : parent_(std::move(parent)),
      prefix_(std::move(prefix)),
      owner_(std::move(owner)) {}

std::string NumberedCheckpoints::folder(int64_t number) const {
  return (fs::path(parent_) / (prefix_ + std::to_string(number))).string();
}

std::string NumberedCheckpoints::staging(int64_t number) const {
  return (fs::path(parent_) / ("tmp-" + prefix_ + std::to_string(number))).string();
}

// Runs `work`, turning a file system error into an sg::Error that names `path`.
template <typename Work>
void NumberedCheckpoints::on_file_system(const std::string& path, Work&& work) const {
  try {
    work();
  } catch (const fs::filesystem_error& error) {
    SG_FAIL(owner_, ": writing checkpoint ", path, ": ", error.what());
  }
}

std::vector<std::pair<int64_t, std::string>> NumberedCheckpoints::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;  // a missing folder holds no checkpoint
  for (const fs::directory_entry& entry : fs::directory_iterator(parent_, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix_) || name.size() == prefix_.size() || name.size() > prefix_.size() + 18) continue;
    const std::string digits = name.substr(prefix_.size());
    if (std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }) &&
        entry.is_directory())
      found.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<std::string> NumberedCheckpoints::newest() const {
  const auto folders = list();
  if (folders.empty()) return std::nullopt;
  return folders.back().second;
}

std::string NumberedCheckpoints::begin_writing(int64_t number) const {
  const std::string path = staging(number);
  on_file_system(path, [&] {
    fs::remove_all(path);
    fs::create_directories(path);
  });
  return path;
}

void NumberedCheckpoints::finish_writing(int64_t number, bool replace) const {
  const std::string path = folder(number);
  on_file_system(path, [&] {
    if (replace) fs::remove_all(path);
    fs::rename(staging(number),
               path);  // fails onto a file or a non-empty folder: Note [Writing a checkpoint folder whole]
  });
}

void NumberedCheckpoints::remove_oldest(int limit, const std::string& kept) const {
  if (limit == 0) return;
  std::vector<std::pair<int64_t, std::string>> folders = list();
  const auto kept_one = std::find_if(folders.begin(), folders.end(), [&](const auto& numbered) {
    return !kept.empty() && fs::path(numbered.second).filename() == fs::path(kept).filename();
  });
  if (kept_one != folders.end() && kept_one + 1 != folders.end())
    std::rotate(kept_one, kept_one + 1, folders.end() - 1);
  for (size_t i = 0; i + static_cast<size_t>(limit) < folders.size(); ++i)
    on_file_system(folders[i].second, [&] { fs::remove_all(folders[i].second); });
}

}  // namespace sg::dist
