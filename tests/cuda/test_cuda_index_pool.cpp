// Indexing and pooling kernels on the GPU against the CPU kernels. Every GPU kernel here moves
// values or sums them in the CPU kernel's order (no float atomics), so results are compared
// exactly; inputs include odd shapes, strided views, duplicate indices and i32 indices.
#include "core/kernels/index.h"
#include "core/kernels/pool.h"
#include "cuda_compare.h"
#include "helpers.h"

#include <limits>

using namespace sg;
using test::gpu;

namespace {

Tensor random_values(const Shape& shape, DType dtype) { return randn(shape, {}, &test::rng()).to(dtype); }

// Indices in [0, size) with repeats, as an i64 (or i32) tensor on the CPU.
Tensor random_indices(const Shape& shape, int64_t size, DType dtype = DType::i64) {
  return randint(0, size, shape, {DType::i64}, &test::rng()).to(dtype);
}

// The same values as a transposed (non-contiguous) view, on the CPU and on the GPU.
std::pair<Tensor, Tensor> strided_pair(const Tensor& values) {
  const Tensor stored = values.transpose(-2, -1).contiguous();
  return {stored.transpose(-2, -1), stored.to(gpu()).transpose(-2, -1)};
}

void check_exact(const Tensor& gpu_result, const Tensor& cpu_result) {
  test::check_matches_cpu(gpu_result, cpu_result, 0.0);
}

}  // namespace

TEST_CASE("index_range on the GPU finds the smallest and largest index") {
  for (DType dtype : {DType::i64, DType::i32}) {
    CAPTURE(dtype);
    Tensor index = random_indices({5003}, 1000, DType::i64);
    index.data_ptr<int64_t>()[4001] = -7;
    index.data_ptr<int64_t>()[17] = 123456;
    const auto range = kernels::index_range(index.to(dtype).to(gpu()));
    CHECK(range.first == -7);
    CHECK(range.second == 123456);
  }
}

TEST_CASE("an out-of-range index on the GPU throws sg::Error naming the op, as on the CPU") {
  const Tensor x = random_values({6, 4}, DType::f32).to(gpu());
  CHECK_THROWS_AS(x.index_select(0, tensor(std::vector<int64_t>{0, 6}).to(gpu())), Error);
  CHECK_THROWS_AS(x.index_select(0, tensor(std::vector<int64_t>{-1, 2}).to(gpu())), Error);
  CHECK_THROWS_AS(x.gather(1, tensor(std::vector<int64_t>{4, 0}, {1, 2}).to(gpu())), Error);
}

TEST_CASE("index_select on the GPU equals the CPU for every dim, dtype, index dtype and strided inputs") {
  for (DType dtype : {DType::f32, DType::f16, DType::i64, DType::boolean}) {
    for (DType index_dtype : {DType::i64, DType::i32}) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        CAPTURE(dtype);
        CAPTURE(index_dtype);
        CAPTURE(dim);
        const Tensor x = dtype == DType::boolean ? random_values({5, 7, 3}, DType::f32).gt(zeros({1}))
                                                 : random_values({5, 7, 3}, dtype);
        const Tensor index = random_indices({9}, x.size(dim), index_dtype);
        Shape shape = x.sizes();
        shape[dim] = 9;
        const auto [x_cpu, x_gpu] = strided_pair(x);
        for (const auto& [cpu_in, gpu_in] : {std::pair{x, x.to(gpu())}, std::pair{x_cpu, x_gpu}}) {
          const Tensor cpu_out = empty(shape, {dtype});
          const Tensor gpu_out = empty(shape, {dtype, gpu()});
          kernels::index_select(cpu_out, cpu_in, dim, index);
          kernels::index_select(gpu_out, gpu_in, dim, index.to(gpu()));
          check_exact(gpu_out, cpu_out);
        }
      }
    }
  }
}

TEST_CASE("index_add on the GPU accumulates duplicate indices in the CPU's order, bit for bit") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      CAPTURE(dtype);
      CAPTURE(dim);
      Shape dst_shape{4, 5, 3};
      Shape src_shape = dst_shape;
      src_shape[dim] = 23;  // many more source rows than destination rows: every row repeats
      const Tensor index = random_indices({23}, dst_shape[dim]);
      const Tensor dst = random_values(dst_shape, dtype);
      const Tensor src = (random_values(src_shape, DType::f32) * 100.0).to(dtype);
      const Tensor cpu_dst = dst.clone(), gpu_dst = dst.to(gpu());
      const auto [src_cpu, src_gpu] = strided_pair(src);
      kernels::index_add(cpu_dst, dim, index, src_cpu);
      kernels::index_add(gpu_dst, dim, index.to(gpu()), src_gpu);
      check_exact(gpu_dst, cpu_dst);
    }
  }
}

TEST_CASE("gather and scatter_add on the GPU equal the CPU, strided and with repeated targets") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::i64}) {
    for (int64_t dim = 0; dim < 2; ++dim) {
      CAPTURE(dtype);
      CAPTURE(dim);
      const Tensor x = (random_values({6, 9}, DType::f32) * 10.0).to(dtype);
      Shape index_shape{5, 7};  // smaller than x off `dim`: only index positions are read
      index_shape[dim] = 13;
      const Tensor index = random_indices(index_shape, x.size(dim));
      const auto [x_cpu, x_gpu] = strided_pair(x);
      const Tensor cpu_out = empty(index_shape, {dtype}), gpu_out = empty(index_shape, {dtype, gpu()});
      kernels::gather(cpu_out, x_cpu, dim, index);
      kernels::gather(gpu_out, x_gpu, dim, index.to(gpu()));
      check_exact(gpu_out, cpu_out);

      const Tensor src = (random_values({13, 13}, DType::f32) * 10.0).to(dtype);  // larger than index
      const Tensor cpu_dst = x.clone(), gpu_dst = x.to(gpu());
      const auto [index_cpu, index_gpu] = strided_pair(index);
      kernels::scatter_add(cpu_dst, dim, index_cpu, src);
      kernels::scatter_add(gpu_dst, dim, index_gpu, src.to(gpu()));
      check_exact(gpu_dst, cpu_dst);
    }
  }
}

TEST_CASE("one_hot, tril and triu on the GPU equal the CPU") {
  const Tensor indices = random_indices({4, 6}, 5, DType::i32);
  const Tensor cpu_hot = zeros({24, 5}, {DType::i64}), gpu_hot = zeros({24, 5}, {DType::i64, gpu()});
  kernels::one_hot(cpu_hot, indices);
  kernels::one_hot(gpu_hot, indices.to(gpu()));
  check_exact(gpu_hot, cpu_hot);

  const Tensor x = random_values({3, 5, 7}, DType::f32);
  const auto [x_cpu, x_gpu] = strided_pair(x);
  for (int64_t diagonal : {-9, -2, 0, 1, 3, 9}) {
    for (bool lower : {true, false}) {
      CAPTURE(diagonal);
      CAPTURE(lower);
      const Tensor cpu_out = empty({3, 5, 7}, {DType::f32}), gpu_out = empty({3, 5, 7}, {DType::f32, gpu()});
      kernels::triangle(cpu_out, x_cpu, diagonal, lower);
      kernels::triangle(gpu_out, x_gpu, diagonal, lower);
      check_exact(gpu_out, cpu_out);
    }
  }
}

namespace {

// An [N, C, H, W] input on the CPU of quarters in [-2, 2] (exact in every dtype), with many ties so
// that the first-maximum rule matters.
Tensor pool_input(DType dtype) {
  return (randint(-8, 9, {2, 3, 11, 9}, {DType::i64}, &test::rng()).to(DType::f32) / 4.0).to(dtype);
}

}  // namespace

TEST_CASE("max_pool2d and its backward on the GPU equal the CPU, ties, NaN, -inf, padding and dilation included") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const std::vector<Pool2dWindow> windows{Pool2dWindow{2, 2}, Pool2dWindow{{3, 2}, {2, 1}, {1, 1}, {1, 2}},
                                            Pool2dWindow{3, 3, 1, 2}};
    for (size_t w = 0; w < windows.size(); ++w) {
      for (bool ceil_mode : {false, true}) {
        CAPTURE(dtype);
        CAPTURE(w);
        CAPTURE(ceil_mode);
        const Pool2dWindow& window = windows[w];
        Tensor input = pool_input(DType::f64);
        double* data = input.data_ptr<double>();
        data[5] = std::numeric_limits<double>::quiet_NaN();
        data[40] = std::numeric_limits<double>::quiet_NaN();
        for (int64_t i = 100; i < 130; ++i) data[i] = -std::numeric_limits<double>::infinity();
        input = input.to(dtype);
        const int64_t P = window_output_size(11, window.kernel_size.h, window.stride.h, window.padding.h,
                                             window.dilation.h, ceil_mode);
        const int64_t Q = window_output_size(9, window.kernel_size.w, window.stride.w, window.padding.w,
                                             window.dilation.w, ceil_mode);
        const Tensor cpu_out = empty({2, 3, P, Q}, {dtype}), gpu_out = empty({2, 3, P, Q}, {dtype, gpu()});
        const Tensor cpu_indices = empty({2, 3, P, Q}, {DType::i64}),
                     gpu_indices = empty({2, 3, P, Q}, {DType::i64, gpu()});
        const auto [input_cpu, input_gpu] = strided_pair(input);
        kernels::max_pool2d(cpu_out, cpu_indices, input_cpu, window);
        kernels::max_pool2d(gpu_out, gpu_indices, input_gpu, window);
        check_exact(gpu_indices, cpu_indices);
        // Exact equality, NaN matching NaN: check_matches_cpu's |gpu - cpu| is NaN for -inf outputs.
        const std::vector<double> got = test::values(gpu_out.to(Device::cpu())), want = test::values(cpu_out);
        for (size_t i = 0; i < want.size(); ++i)
          CHECK_MESSAGE((got[i] == want[i] || (got[i] != got[i] && want[i] != want[i])), "output ", i);

        const Tensor grad_out = random_values({2, 3, P, Q}, dtype);
        const Tensor cpu_grad = empty(input.sizes(), {dtype}), gpu_grad = empty(input.sizes(), {dtype, gpu()});
        kernels::max_pool2d_backward(cpu_grad, grad_out, cpu_indices, window);
        kernels::max_pool2d_backward(gpu_grad, grad_out.to(gpu()), gpu_indices, window);
        check_exact(gpu_grad, cpu_grad);
      }
    }
  }
}

TEST_CASE("avg_pool2d and its backward on the GPU equal the CPU with padding, ceil_mode and divisor_override") {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (bool count_include_pad : {false, true}) {
      for (bool ceil_mode : {false, true}) {
        for (std::optional<int64_t> divisor : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
          CAPTURE(dtype);
          CAPTURE(count_include_pad);
          CAPTURE(ceil_mode);
          CAPTURE(divisor.value_or(0));
          const Pool2dWindow window{{3, 2}, {2, 3}, {1, 1}};
          const int64_t P = window_output_size(11, 3, 2, 1, 1, ceil_mode),
                        Q = window_output_size(9, 2, 3, 1, 1, ceil_mode);
          const Tensor input = pool_input(dtype);
          const auto [input_cpu, input_gpu] = strided_pair(input);
          const Tensor cpu_out = empty({2, 3, P, Q}, {dtype}), gpu_out = empty({2, 3, P, Q}, {dtype, gpu()});
          kernels::avg_pool2d(cpu_out, input_cpu, window, count_include_pad, divisor);
          kernels::avg_pool2d(gpu_out, input_gpu, window, count_include_pad, divisor);
          check_exact(gpu_out, cpu_out);

          const auto [grad_cpu, grad_gpu] = strided_pair(random_values({2, 3, P, Q}, dtype));
          const Tensor cpu_grad = empty(input.sizes(), {dtype}), gpu_grad = empty(input.sizes(), {dtype, gpu()});
          kernels::avg_pool2d_backward(cpu_grad, grad_cpu, window, count_include_pad, divisor);
          kernels::avg_pool2d_backward(gpu_grad, grad_gpu, window, count_include_pad, divisor);
          check_exact(gpu_grad, cpu_grad);
        }
      }
    }
  }
}

TEST_CASE("adaptive_avg_pool2d and its backward on the GPU equal the CPU, for output sizes that do not divide") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const Shape& output : {Shape{1, 1}, Shape{4, 5}, Shape{11, 9}, Shape{13, 2}}) {
      CAPTURE(dtype);
      CAPTURE(output[0]);
      CAPTURE(output[1]);
      const Tensor input = pool_input(dtype);
      const auto [input_cpu, input_gpu] = strided_pair(input);
      const Shape out_shape{2, 3, output[0], output[1]};
      const Tensor cpu_out = empty(out_shape, {dtype}), gpu_out = empty(out_shape, {dtype, gpu()});
      kernels::adaptive_avg_pool2d(cpu_out, input_cpu);
      kernels::adaptive_avg_pool2d(gpu_out, input_gpu);
      check_exact(gpu_out, cpu_out);

      const Tensor grad_out = random_values(out_shape, dtype);
      const Tensor cpu_grad = empty(input.sizes(), {dtype}), gpu_grad = empty(input.sizes(), {dtype, gpu()});
      kernels::adaptive_avg_pool2d_backward(cpu_grad, grad_out);
      kernels::adaptive_avg_pool2d_backward(gpu_grad, grad_out.to(gpu()));
      check_exact(gpu_grad, cpu_grad);
    }
  }
}
