#pragma once
// defines: StridedOffsets<N> — turns an element's linear index (row-major over the output's
//          shape) into one byte offset per operand. The CPU loops use it where a run starts
//          (core/cpu/loops.h); the CUDA elementwise kernels use it per element
//          (core/cuda/elementwise.cuh), so both walk memory by the same rule.
//
// Operand 0 is the output, the others are inputs read through their byte strides, 0 on a
// broadcast dim. The shape is usually coalesced first (Note [How an elementwise kernel walks
// memory]), so a contiguous tensor of any rank is one dim. The arrays are fixed-size, so the
// struct can be passed by value to a kernel.
#include <array>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/host_device.h"
#include "core/shape.h"

namespace sg {

inline constexpr int kMaxStridedDims = 12;

template <int N>
struct StridedOffsets {
  int ndim = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxStridedDims] = {};
  int64_t byte_strides[kMaxStridedDims][N] = {};

  // Host only. `byte_strides[k]` has one entry per dim of `shape` for operand k.
  static StridedOffsets make(const std::vector<int64_t>& shape, const std::array<std::vector<int64_t>, N>& byte_strides,
                             const char* op_name) {
    const int ndim = static_cast<int>(shape.size());
    SG_CHECK(ndim <= kMaxStridedDims, op_name, ": at most ", kMaxStridedDims,
             " dims that do not merge are supported, got the merged shape ", shape_str(shape));
    StridedOffsets result;
    result.ndim = ndim;
    for (int d = 0; d < ndim; ++d) {
      result.sizes[d] = shape[d];
      result.numel *= shape[d];
      for (int k = 0; k < N; ++k) result.byte_strides[d][k] = byte_strides[k][d];
    }
    return result;
  }

  // offsets[k] = sum over dims of index_d * byte_strides[d][k], where index_d are the digits of
  // `linear` in the mixed radix `sizes`. The outermost dim takes the rest without a division.
  SG_HOST_DEVICE void get(int64_t linear, int64_t (&offsets)[N]) const {
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) offsets[k] += i * byte_strides[d][k];
    }
    if (ndim > 0)
      for (int k = 0; k < N; ++k) offsets[k] += linear * byte_strides[0][k];
  }
};

}  // namespace sg
