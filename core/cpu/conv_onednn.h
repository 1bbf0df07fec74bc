#pragma once
// defines: cpu::onednn::try_conv2d, try_conv2d_grad_input, try_conv2d_grad_weight, implementation — the
//          CPU convolutions on oneDNN primitives (core/cpu/conv_onednn.cpp), for core/cpu/conv.cpp only.
//
// Each try_ function runs the call and returns true where oneDNN's blocked direct kernels beat the
// im2col + GEMM reference (Note [When oneDNN runs] in the .cpp): f32, no empty dim, a pass and shape
// the rule picks, and a direct kernel for it in oneDNN. Otherwise it does nothing and returns false,
// and core/cpu/conv.cpp runs the reference. Same contract as the kernels in core/kernels/conv.h:
// inputs of any strides, outputs contiguous.
//
// Also defines cpu_engine and PlanCache, which the GEMM with a bias (core/cpu/gemm_onednn.cpp) shares.
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cpu/conv_kernels.h"
#include "core/parallel.h"

namespace sg::cpu::onednn {

// The one CPU engine every oneDNN primitive here is made for.
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

bool try_conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                const Conv2dParams& params);
bool try_conv2d_grad_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& params);
bool try_conv2d_grad_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& params);

// The oneDNN kernel that runs `pass` and the operands reordered around it (e.g. "jit:avx2, reorders
// input, weight, out"), or "" where the try_ function declines it (cpu::conv2d_implementation).
std::string implementation(ConvPass pass, const Shape& input, const Shape& weight, DType dtype,
                           const Conv2dParams& params);

}  // namespace sg::cpu::onednn
