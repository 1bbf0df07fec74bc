#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace sg {

namespace {
std::string last_error() { return std::system_category().message(errno); }

// fsync of the directory makes a rename inside it durable. File systems that cannot sync a
// directory answer EINVAL; there is nothing more to do on those.
void sync_directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::filesystem::path directory = parent.empty() ? std::filesystem::path(".") : parent;
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY);
  SG_CHECK(fd >= 0, "write ", path, ": cannot open its directory to sync it: ", last_error());
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
  const std::string error = synced ? "" : last_error();
  ::close(fd);
  SG_CHECK(synced, "write ", path, ": the file is in place but syncing its directory failed: ", error);
}
}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(const ByteWriter& write)>& fill) {
  const std::string temp_path = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  SG_CHECK(file != nullptr, "write ", path, ": cannot create ", temp_path, ": ", last_error());
  try {
    const ByteWriter write = [&](const void* data, size_t nbytes) {
      SG_CHECK(nbytes == 0 || std::fwrite(data, 1, nbytes, file) == nbytes, "writing ", temp_path, " failed: ",
               last_error());
    };
    fill(write);
    SG_CHECK(std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0, "flushing ", temp_path, " failed: ",
             last_error());
    std::FILE* closing = file;
    file = nullptr;
    SG_CHECK(std::fclose(closing) == 0, "closing ", temp_path, " failed: ", last_error());
    SG_CHECK(std::rename(temp_path.c_str(), path.c_str()) == 0, "renaming ", temp_path, " over it failed: ",
             last_error());
  } catch (const std::exception& error) {
    if (file != nullptr) std::fclose(file);
    std::remove(temp_path.c_str());
    throw Error(detail::concat("write ", path, ": ", error.what(), " (the old file, if any, is unchanged)"));
  }
  sync_directory_of(path);
}

}  // namespace sg
