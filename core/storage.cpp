#include "core/storage.h"

#include "core/profiler.h"

namespace sg {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(nbytes);
  profiler::record_allocation(nbytes, device);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      external_deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (allocator_) allocator_->deallocate(data_, nbytes_);
  else if (external_deleter_) external_deleter_(data_);
}

}  // namespace sg
