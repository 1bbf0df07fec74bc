#include "core/cpu/onednn_plans.h"

#include <sys/mman.h>

#include "core/error.h"

namespace sg::cpu::onednn {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Note [oneDNN scratch memory]
// Every primitive here is made with scratchpad_mode::user: a call brings its scratch memory, so a
// plan can run on several threads at once. Each plan's scratchpad has a size of its own (Winograd's
// hold transformed tiles: 7-22 MB each on ResNet34 at 224², batch 4). Taken from the CPU allocator,
// every size would stay in its block cache (Note [CPU block cache] in core/allocator.cpp): 88 MB
// there against 22 MB for the largest. So each thread keeps one mapping, replaced by a larger one
// when a plan needs more; a scratchpad lives only while its primitive runs, and a thread runs one
// primitive at a time.
namespace {

class ScratchMapping {
public:
  ScratchMapping() = default;
  ScratchMapping(const ScratchMapping&) = delete;
  ScratchMapping& operator=(const ScratchMapping&) = delete;
  ~ScratchMapping() { release(); }

  void* at_least(size_t bytes) {
    if (bytes > bytes_) {
      release();
      void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      SG_CHECK(mapped != MAP_FAILED, "oneDNN: out of memory mapping ", bytes, " bytes of scratch memory");
      data_ = mapped;
      bytes_ = bytes;
    }
    return data_;
  }

private:
  void release() {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

void* scratchpad_of_this_thread(size_t bytes) {
  thread_local ScratchMapping scratch;
  return scratch.at_least(bytes);
}

}  // namespace sg::cpu::onednn
