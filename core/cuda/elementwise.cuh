#pragma once
// defines: cuda::ElementwiseOperands, cuda::describe_operands, cuda::gpu_elementwise,
//          cuda::gpu_map — the one launcher every CUDA elementwise kernel
//          (pointwise ops, optimizers, AMP) is built from.
//
// Operand 0 is the output; the others are inputs broadcast to its shape. The host describes
// the operands exactly as the CPU loops do (core/cpu/operands.h: byte strides, 0 on broadcast
// dims, coalesced), and each GPU thread maps its linear element index to a byte offset per
// operand with the same StridedOffsets the CPU uses where its runs start
// (core/strided_offsets.h). A grid-stride loop over 64-bit indices covers any size with a
// bounded grid.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "core/cpu/operands.h"  // the layout description is host code shared by both backends
#include "core/cuda_runtime/check.h"
#include "core/cuda_runtime/stream.h"
#include "core/strided_offsets.h"

namespace sg::cuda {

template <int N>
struct ElementwiseOperands {
  char* data[N];
  StridedOffsets<N> layout;
};

// `tensors[0]` is the output, of shape `shape`; the inputs broadcast to it.
template <int N>
ElementwiseOperands<N> describe_operands(const Shape& shape, const std::array<const Tensor*, N>& tensors,
                                         const char* op_name) {
  cpu::Operands<N> ops = cpu::make_operands<N>(shape, tensors);
  Shape merged = shape;
  cpu::coalesce<N>(merged, ops);
  ElementwiseOperands<N> result;
  for (int k = 0; k < N; ++k) result.data[k] = ops.data[k];
  result.layout = StridedOffsets<N>::make(merged, ops.byte_strides, op_name);
  return result;
}

template <int N, typename F>
__global__ void elementwise_kernel(ElementwiseOperands<N> ops, F f) {
  const int64_t numel = ops.layout.numel;
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t index = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; index < numel; index += step) {
    int64_t offsets[N];
    ops.layout.get(index, offsets);
    char* pointers[N];
    for (int k = 0; k < N; ++k) pointers[k] = ops.data[k] + offsets[k];
    f(pointers);
  }
}

// Calls f(pointers) on the GPU once per element, pointers[k] addressing operand k's element.
// The caller holds a DeviceGuard for the output's device.
template <int N, typename F>
void gpu_elementwise(const ElementwiseOperands<N>& ops, const F& f) {
  const int64_t numel = ops.layout.numel;
  if (numel == 0) return;
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 65536;  // past this, the grid-stride loop gives each thread more elements
  const int64_t blocks = std::min((numel + kThreads - 1) / kThreads, kMaxBlocks);
  elementwise_kernel<N, F><<<static_cast<unsigned>(blocks), kThreads, 0, compute_stream()>>>(ops, f);
  SG_CUDA_CHECK_LAUNCH();
}

// Out = f(In...) per element: loads the inputs as In..., stores the result as Out.
template <typename F, typename Out, typename... In>
struct MapElement {
  F f;
  template <size_t... I>
  __device__ void apply(char* const* pointers, std::index_sequence<I...>) const {
    *reinterpret_cast<Out*>(pointers[0]) = f(*reinterpret_cast<const In*>(pointers[I + 1])...);
  }
  __device__ void operator()(char* const* pointers) const { apply(pointers, std::index_sequence_for<In...>{}); }
};

template <typename Out, typename... In, typename F>
void gpu_map(const ElementwiseOperands<1 + sizeof...(In)>& ops, const F& f) {
  gpu_elementwise(ops, MapElement<F, Out, In...>{f});
}

}  // namespace sg::cuda
