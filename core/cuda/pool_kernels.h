#pragma once
// defines: the CUDA pooling kernels — cuda::max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backwards
//          (core/cuda/pool.cu).
// The CUDA half of core/kernels/pool.h, which holds the contract: for its dispatch and the kernels only.
#include <optional>

#include "core/kernels/pool.h"

namespace sg::cuda {
void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dWindow& window);
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dWindow& window);
void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dWindow& window, bool count_include_pad,
                std::optional<int64_t> divisor_override);
void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dWindow& window,
                         bool count_include_pad, std::optional<int64_t> divisor_override);
void adaptive_avg_pool2d(const Tensor& out, const Tensor& input);
void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out);
}  // namespace sg::cuda
