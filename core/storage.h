#pragma once
// defines: Storage — a reference-counted block of bytes on one device, shared by views.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/allocator.h"

namespace sg {

class Storage {
public:
  // Owns `nbytes` fresh bytes from the device's allocator.
  Storage(size_t nbytes, Device device);
  // Wraps memory the caller owns; `deleter` (may be empty) runs when the last view dies.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place write. Autograd compares it with the value it saw when it saved
  // a tensor for backward, to catch "modified by an in-place operation" errors.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;               // set when we own the memory
  std::function<void(void*)> external_deleter_;  // set when the caller owns it
  uint64_t version_ = 0;
};

}  // namespace sg
