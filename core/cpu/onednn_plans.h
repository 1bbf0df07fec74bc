#pragma once
// defines: cpu::onednn::cpu_engine, PlanCache, scratchpad_of_this_thread — what the CPU code on oneDNN
//          primitives shares: the convolutions (core/cpu/conv_onednn.cpp) and the GEMM with a bias
//          (core/cpu/gemm_onednn.cpp).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/parallel.h"

namespace sg::cpu::onednn {

// The one CPU engine every oneDNN primitive is made for.
const dnnl::engine& cpu_engine();

// Made oneDNN primitives (a Plan holds one and what runs around it), one per key and thread count
// (Note [oneDNN convolution plans] in core/cpu/conv_onednn.cpp says why both), behind a mutex. A
// plan never changes once made, so callers may run it on several threads at once.
template <typename Plan>
class PlanCache {
public:
  // The plan for `key` at the current thread count, made by `make()` on first use. A null plan
  // (oneDNN has no implementation worth running, or throws dnnl::error for none at all) is kept
  // too, so the caller's fallback is chosen once.
  template <typename Make>
  std::shared_ptr<const Plan> get(std::vector<int64_t> key, const Make& make) {
    key.push_back(get_num_threads());
    const std::lock_guard lock(mutex_);
    if (const auto found = plans_.find(key); found != plans_.end()) return found->second;
    std::shared_ptr<const Plan> made;
    try {
      made = make();
    } catch (const dnnl::error&) {}
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.emplace(std::move(key), made);
    return made;
  }

private:
  // A training program uses a few dozen plans; one that cycles through more shapes than this starts over.
  static constexpr size_t kMaxPlans = 512;
  std::mutex mutex_;
  std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
};

// `bytes` of scratch memory for a primitive made with scratchpad_mode::user, from one mapping per
// thread that grows to the largest need (Note [oneDNN scratch memory] in core/cpu/onednn_plans.cpp).
// Valid until the thread's next call.
void* scratchpad_of_this_thread(size_t bytes);

}  // namespace sg::cpu::onednn
