#pragma once
// defines: cpu::make_operands — describes tensors to the strided loops of core/cpu/loops.h.
#include <array>

#include "core/cpu/loops.h"
#include "core/tensor.h"

namespace sg::cpu {

// Byte strides of `t` when broadcast to `shape` (0 on dims that are broadcast or missing).
std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& shape);

template <int N>
Operands<N> make_operands(const Shape& shape, const std::array<const Tensor*, N>& tensors) {
  Operands<N> ops;
  for (int k = 0; k < N; ++k) {
    ops.data[k] = static_cast<char*>(tensors[k]->raw_data());
    ops.byte_strides[k] = broadcast_byte_strides(*tensors[k], shape);
  }
  return ops;
}

}  // namespace sg::cpu
