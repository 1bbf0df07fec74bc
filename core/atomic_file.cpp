#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace sg {

namespace {
namespace fs = std::filesystem;

std::string last_error() { return std::system_category().message(errno); }

fs::path directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// Removes "<path>.tmp.<pid>" files whose process no longer exists: what a writer killed between
// creating its temporary file and the rename leaves behind. Files of live processes (or of pids
// we may not signal) stay, and so does everything else in the directory. Best effort: a file that
// cannot be listed or removed is left, and the write goes on. (A process of another machine or
// pid namespace writing into the same directory would look dead from here; do not share one.)
void remove_stale_temp_files(const std::string& path) {
  const std::string prefix = fs::path(path).filename().string() + ".tmp.";
  std::error_code error;
  for (fs::directory_iterator it(directory_of(path), error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    pid_t pid = 0;
    const char* digits_end = name.data() + name.size();
    const auto parsed = std::from_chars(name.data() + prefix.size(), digits_end, pid);
    if (parsed.ec != std::errc() || parsed.ptr != digits_end || pid <= 0 || pid == ::getpid()) continue;
    std::error_code ignored;
    if (::kill(pid, 0) == -1 && errno == ESRCH) fs::remove(it->path(), ignored);
  }
}

// fsync of the directory makes a rename inside it durable. File systems that cannot sync a
// directory answer EINVAL; there is nothing more to do on those.
void sync_directory_of(const std::string& path) {
  const int fd = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY);
  SG_CHECK(fd >= 0, "write ", path, ": cannot open its directory to sync it: ", last_error());
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
  const std::string error = synced ? "" : last_error();
  ::close(fd);
  SG_CHECK(synced, "write ", path, ": the file is in place but syncing its directory failed: ", error);
}
}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(const ByteWriter& write)>& fill) {
  remove_stale_temp_files(path);
  const std::string temp_path = path + ".tmp." + std::to_string(::getpid());
  // Until the rename has consumed it, the temporary file is closed and removed however the write
  // ends: an error here, or `fill` throwing anything at all.
  struct TempFile {
    const std::string& path;
    std::FILE* file;
    bool renamed = false;
    ~TempFile() {
      if (file != nullptr) std::fclose(file);
      if (!renamed) std::remove(path.c_str());
    }
  } temp{temp_path, std::fopen(temp_path.c_str(), "wb")};
  SG_CHECK(temp.file != nullptr, "write ", path, ": cannot create ", temp_path, ": ", last_error());
  try {
    const ByteWriter write = [&](const void* data, size_t nbytes) {
      SG_CHECK(nbytes == 0 || std::fwrite(data, 1, nbytes, temp.file) == nbytes, "writing ", temp_path,
               " failed: ", last_error());
    };
    fill(write);
    SG_CHECK(std::fflush(temp.file) == 0 && ::fsync(::fileno(temp.file)) == 0, "flushing ", temp_path,
             " failed: ", last_error());
    std::FILE* closing = temp.file;
    temp.file = nullptr;
    SG_CHECK(std::fclose(closing) == 0, "closing ", temp_path, " failed: ", last_error());
    SG_CHECK(std::rename(temp_path.c_str(), path.c_str()) == 0, "renaming ", temp_path,
             " over it failed: ", last_error());
    temp.renamed = true;
  } catch (const std::exception& error) {
    SG_FAIL("write ", path, ": ", error.what(), " (the old file, if any, is unchanged)");
  }
  sync_directory_of(path);
}

void check_writable_destination(const std::string& what, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::filesystem::path directory = parent.empty() ? std::filesystem::path(".") : parent;
  std::error_code error;
  SG_CHECK(std::filesystem::is_directory(directory, error), what, " ", path, ": the directory ", directory.string(),
           " does not exist (create it first)");
  SG_CHECK(::access(directory.c_str(), W_OK | X_OK) == 0, what, " ", path, ": cannot write to the directory ",
           directory.string(), ": ", std::strerror(errno));
  SG_CHECK(!std::filesystem::is_directory(path, error), what, " ", path, " is a directory; give a file name");
}

}  // namespace sg
