#pragma once
// defines: cpu::for_each_run, cpu::unary_loop, cpu::binary_loop — the strided loops every
//          CPU elementwise kernel is built from (a small cousin of PyTorch's TensorIterator).
//
// Note [How an elementwise kernel walks memory]
// Operand 0 is the output; every operand is described by a byte stride per output dim (0 on
// a broadcast dim). Adjacent dims that are laid out back to back in *every* operand are merged,
// so a contiguous tensor of any rank becomes one long run. The innermost dim is then handed to
// an `inner(pointers, strides, count)` function in runs; runs are split across threads by
// linear element index, so the split does not depend on the shape. The inner function has a
// fast path when all strides equal the element size, which the compiler vectorises.
#include <array>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "core/shape.h"
#include "core/strided_offsets.h"

namespace sg::cpu {

template <int N>
struct Operands {
  std::array<char*, N> data;
  std::array<std::vector<int64_t>, N> byte_strides;  // one entry per dim of `shape`
};

// Merges dims that are contiguous with their inner neighbour in every operand.
template <int N>
void coalesce(Shape& shape, Operands<N>& ops) {
  if (shape.size() <= 1) return;
  Shape merged_shape{shape[0]};
  std::array<std::vector<int64_t>, N> merged;
  for (int k = 0; k < N; ++k) merged[k] = {ops.byte_strides[k][0]};
  for (size_t d = 1; d < shape.size(); ++d) {
    bool can_merge = true;
    for (int k = 0; k < N; ++k) can_merge = can_merge && merged[k].back() == ops.byte_strides[k][d] * shape[d];
    if (can_merge) {
      merged_shape.back() *= shape[d];
      for (int k = 0; k < N; ++k) merged[k].back() = ops.byte_strides[k][d];
    } else {
      merged_shape.push_back(shape[d]);
      for (int k = 0; k < N; ++k) merged[k].push_back(ops.byte_strides[k][d]);
    }
  }
  shape = merged_shape;
  ops.byte_strides = merged;
}

// Calls inner(pointers, inner_strides, count) over every element of `shape`, in parallel.
template <int N, typename Inner>
void for_each_run(Shape shape, Operands<N> ops, Inner&& inner) {
  const int64_t total = numel_of(shape);
  if (total == 0) return;
  if (shape.empty()) {  // a scalar: one run of one element
    std::array<int64_t, N> zero{};
    inner(ops.data, zero, int64_t(1));
    return;
  }
  coalesce<N>(shape, ops);
  const int64_t inner_size = shape.back();
  std::array<int64_t, N> inner_strides;
  for (int k = 0; k < N; ++k) inner_strides[k] = ops.byte_strides[k].back();

  const auto offsets = StridedOffsets<N>::make(shape, ops.byte_strides, "elementwise loop");

  parallel_for(total, kParallelGrain, [&](int64_t begin, int64_t end) {
    int64_t index = begin;
    while (index < end) {
      // A base pointer per operand for the run's first element; the run continues from there.
      int64_t byte_offsets[N];
      offsets.get(index, byte_offsets);
      std::array<char*, N> pointers = ops.data;
      for (int k = 0; k < N; ++k) pointers[k] += byte_offsets[k];
      const int64_t offset_in_run = index % inner_size;
      const int64_t count = std::min(inner_size - offset_in_run, end - index);
      inner(pointers, inner_strides, count);
      index += count;
    }
  });
}

// out[i] = f(in[i]) over one run; the contiguous case is a plain loop the compiler vectorises.
template <typename Out, typename In, typename F>
inline void unary_run(const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n, F f) {
  Out* out = reinterpret_cast<Out*>(p[0]);
  const In* in = reinterpret_cast<const In*>(p[1]);
  if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
  }
}

// out[i] = f(a[i], b[i]); fast paths (which the compiler vectorises, so a data-dependent select
// costs no branch mispredictions) for all-contiguous and for a broadcast scalar a or b.
template <typename Out, typename In, typename F>
inline void binary_run(const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n, F f) {
  Out* out = reinterpret_cast<Out*>(p[0]);
  const In* a = reinterpret_cast<const In*>(p[1]);
  const In* b = reinterpret_cast<const In*>(p[2]);
  if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == sizeof(In)) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == 0) {
    const In scalar = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], scalar);
  } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(In)) {
    // A broadcast first operand: e.g. the expanded gradient of sum() meeting relu's backward.
    const In scalar = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(scalar, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(p[0] + i * s[0]) =
          f(*reinterpret_cast<const In*>(p[1] + i * s[1]), *reinterpret_cast<const In*>(p[2] + i * s[2]));
  }
}

}  // namespace sg::cpu
