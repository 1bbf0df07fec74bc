#pragma once
// defines: TensorOptions and the factories — empty, zeros, ones, full, arange, linspace,
//          rand, randn, randint, tensor(vector), from_blob, *_like.
#include <functional>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace sg {

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = Device::cpu();
};

Tensor empty(const Shape& shape, TensorOptions options = {});  // uninitialised
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor scalar_tensor(double value, TensorOptions options = {});  // 0-dim

// [start, end) by step; the default dtype is i64 (PyTorch's for integer arguments).
Tensor arange(double end, TensorOptions options = {DType::i64, Device::cpu()});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {DType::i64, Device::cpu()});
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});

// Random draws use `generator` (the default one when null), so a seed reproduces them.
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);  // N(0, 1)
// Integers uniform in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {DType::i64, Device::cpu()},
               Generator* generator = nullptr);

// Copies `values` into a new tensor of `shape` (default: 1-D, whatever the number of values;
// scalar_tensor makes a 0-dim tensor); the dtype follows T.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape = {});
// Wraps memory the caller owns, without copying; `deleter` (may be empty) runs when the last
// tensor using it dies. `strides` default to contiguous.
Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> deleter = {},
                 const Shape& strides = {});

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor rand_like(const Tensor& t, Generator* generator = nullptr);
Tensor randn_like(const Tensor& t, Generator* generator = nullptr);

}  // namespace sg
