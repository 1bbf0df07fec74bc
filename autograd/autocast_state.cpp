#include "autograd/autocast_state.h"

#include <map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops_shape.h"

namespace sg::autograd {

namespace {

struct CachedCast {
  std::shared_ptr<TensorImpl> source;  // kept alive so its address cannot be reused while cached
  uint64_t version;                    // the source's storage version when it was cast
  Tensor cast;
};

struct ThreadAutocast {
  AutocastState state;
  int nesting = 0;
  std::map<const TensorImpl*, CachedCast> cache;
};

thread_local ThreadAutocast this_thread;

bool cacheable(const Tensor& x, DType dtype) {
  const AutogradMeta* meta = meta_of(x);
  return this_thread.nesting > 0 && dtype == this_thread.state.dtype && GradMode::is_enabled() && meta != nullptr &&
         meta->requires_grad && meta->grad_fn == nullptr && !meta->is_view;
}

// A cached cast is reusable while its source is unchanged and its graph not yet freed.
bool still_valid(const CachedCast& entry) {
  const AutogradMeta* meta = meta_of(entry.cast);
  return entry.version == entry.source->storage->version() && meta != nullptr && meta->grad_fn != nullptr &&
         !meta->grad_fn->released();
}

}  // namespace

AutocastState autocast_state() { return this_thread.state; }
void set_autocast_state(AutocastState state) { this_thread.state = state; }

void autocast_enter() { ++this_thread.nesting; }

void autocast_exit() {
  SG_CHECK(this_thread.nesting > 0, "autocast_exit: no autocast region is open on this thread");
  if (--this_thread.nesting == 0) this_thread.cache.clear();
}

Tensor autocast_cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  if (!cacheable(x, dtype)) return to_dtype(x, dtype);
  auto it = this_thread.cache.find(x.impl());
  if (it != this_thread.cache.end() && still_valid(it->second)) return it->second.cast;
  Tensor cast = to_dtype(x, dtype);
  this_thread.cache.insert_or_assign(x.impl(), CachedCast{x.impl_ptr(), x.storage()->version(), cast});
  return cast;
}

size_t autocast_cache_size() { return this_thread.cache.size(); }

}  // namespace sg::autograd
