#pragma once
// defines: FuzzInputFile — a private temporary file that a fuzz target rewrites with each input,
//          for readers that take a path (they are fuzzed through the same calls users make).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

class FuzzInputFile {
public:
  // `suffix` matters to readers that look at the name (".gz"). In /dev/shm when there is one: a
  // file in memory is rewritten several times faster, and the rate of executions is the point.
  explicit FuzzInputFile(const std::string& suffix) {
    const char* directory = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string pattern = std::string(directory) + "/sg_fuzz_XXXXXX" + suffix;
    const int fd = ::mkstemps(pattern.data(), static_cast<int>(suffix.size()));
    if (fd < 0) std::abort();
    ::close(fd);
    path_ = pattern;
  }
  ~FuzzInputFile() { std::remove(path_.c_str()); }

  const std::string& write(const uint8_t* data, size_t size) {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    if (file == nullptr || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) std::abort();
    return path_;
  }

private:
  std::string path_;
};
