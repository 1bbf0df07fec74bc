// The CUDA pointwise kernels (core/cuda/pointwise.cu) against the CPU kernels on the same seeded
// inputs: every unary and binary op in the dtypes the CPU supports, broadcasting, strided inputs
// and outputs, odd sizes, dtype conversions through copy, fill, clamp and where. The kernels are
// called through sg::kernels, as the op fronts call them, so the GPU and the CPU run the very
// same entry point with tensors on different devices.
#include <cmath>
#include <limits>
#include <utility>

#include "core/kernels/pointwise.h"
#include "cuda_compare.h"
#include "helpers.h"

using namespace sg;
using test::gpu;

namespace {

const DType kFloatingDtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
const DType kAllDtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                            DType::i64, DType::i32, DType::u8,  DType::boolean};

enum class Layout { contiguous, transposed, strided };
const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::strided};
const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::strided: return "strided";
  }
  return "?";
}

// `t` (a CPU tensor) moved to `device` with the same values laid out as `layout` says:
// contiguous, with the first and last dims swapped in memory, or every other element of a
// buffer twice as wide.
Tensor laid_out(const Tensor& t, Device device, Layout layout) {
  const Tensor moved = t.to(device);
  switch (layout) {
    case Layout::contiguous: return moved.contiguous();
    case Layout::transposed: return moved.transpose(0, -1).contiguous().transpose(0, -1);
    case Layout::strided: {
      Shape wide = t.sizes();
      wide.back() *= 2;
      Tensor every_other = zeros(wide, {t.dtype(), device}).slice(-1, 0, wide.back(), 2);
      every_other.copy_(moved);
      return every_other;
    }
  }
  return moved;
}

// Uniform in [low, high), drawn in f64 and converted (integers truncate toward zero).
Tensor uniform(const Shape& shape, DType dtype, double low, double high) {
  return (rand(shape, {DType::f64}, &test::rng()) * (high - low) + low).to(dtype);
}

// Integer-valued inputs in [low, high): comparisons and maximum/minimum then meet ties.
Tensor small_integers(const Shape& shape, DType dtype, int64_t low, int64_t high) {
  return randint(low, high, shape, {DType::i64, Device::cpu()}, &test::rng()).to(dtype);
}

// Runs kernels::unary on the CPU and on the GPU, with input and output in the given layouts.
void check_unary(UnaryOp op, const Tensor& x, Layout in_layout, Layout out_layout) {
  const Tensor out_cpu = laid_out(zeros(x.sizes(), {x.dtype()}), Device::cpu(), out_layout);
  const Tensor out_gpu = laid_out(zeros(x.sizes(), {x.dtype()}), gpu(), out_layout);
  kernels::unary(op, out_cpu, laid_out(x, Device::cpu(), in_layout));
  kernels::unary(op, out_gpu, laid_out(x, gpu(), in_layout));
  test::check_matches_cpu(out_gpu, out_cpu);
}

// Runs kernels::binary on both devices; `a` and `b` broadcast to the output.
void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, double alpha, Layout a_layout, Layout b_layout,
                  Layout out_layout) {
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "test");
  const DType out_dtype = is_comparison(op) ? DType::boolean : a.dtype();
  const Tensor out_cpu = laid_out(zeros(shape, {out_dtype}), Device::cpu(), out_layout);
  const Tensor out_gpu = laid_out(zeros(shape, {out_dtype}), gpu(), out_layout);
  kernels::binary(op, out_cpu, laid_out(a, Device::cpu(), a_layout), laid_out(b, Device::cpu(), b_layout), alpha);
  kernels::binary(op, out_gpu, laid_out(a, gpu(), a_layout), laid_out(b, gpu(), b_layout), alpha);
  test::check_matches_cpu(out_gpu, out_cpu);
}

const BinaryOp kArithmeticOps[] = {BinaryOp::add,
                                   BinaryOp::sub,
                                   BinaryOp::mul,
                                   BinaryOp::div,
                                   BinaryOp::pow,
                                   BinaryOp::maximum,
                                   BinaryOp::minimum,
                                   BinaryOp::relu_backward,
                                   BinaryOp::gelu_erf_backward,
                                   BinaryOp::gelu_tanh_backward};
const BinaryOp kComparisons[] = {BinaryOp::eq, BinaryOp::ne, BinaryOp::lt, BinaryOp::le, BinaryOp::gt, BinaryOp::ge};

}  // namespace

TEST_CASE("every unary op matches the CPU in every floating dtype, for strided inputs and outputs") {
  const UnaryOp ops[] = {UnaryOp::neg,     UnaryOp::exp,  UnaryOp::log,      UnaryOp::sqrt,
                         UnaryOp::rsqrt,   UnaryOp::abs,  UnaryOp::sign,     UnaryOp::tanh,
                         UnaryOp::sigmoid, UnaryOp::relu, UnaryOp::gelu_erf, UnaryOp::gelu_tanh};
  for (DType dtype : kFloatingDtypes) {
    for (UnaryOp op : ops) {
      // log, sqrt and rsqrt on positive inputs; the others across zero, past where sigmoid's two
      // formulas meet and far enough out for exp and tanh to saturate in 16 bits.
      const bool positive_only = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
      const Tensor x = positive_only ? uniform({7, 13}, dtype, 0.05, 4.0) : uniform({7, 13}, dtype, -6.0, 6.0);
      for (Layout in_layout : kLayouts) {
        for (Layout out_layout : {Layout::contiguous, Layout::transposed}) {
          CAPTURE(dtype);
          INFO(unary_op_name(op), ": input ", layout_name(in_layout), ", output ", layout_name(out_layout));
          check_unary(op, x, in_layout, out_layout);
        }
      }
    }
  }
}

TEST_CASE("unary ops that are exact on integers match the CPU bit for bit") {
  // exp, log, ... of an integer go through double and truncate, where one unit of the last place
  // of the GPU's libm can change the integer: those are not compared.
  for (DType dtype : {DType::i64, DType::i32, DType::u8}) {
    const Tensor x =
        dtype == DType::u8 ? small_integers({9, 11}, dtype, 0, 256) : small_integers({9, 11}, dtype, -50, 50);
    for (UnaryOp op : {UnaryOp::neg, UnaryOp::abs, UnaryOp::sign, UnaryOp::relu}) {
      CAPTURE(dtype);
      INFO(unary_op_name(op));
      check_unary(op, x, Layout::transposed, Layout::contiguous);
    }
  }
}

TEST_CASE("every arithmetic binary op matches the CPU in every floating dtype, with alpha and broadcasting") {
  for (DType dtype : kFloatingDtypes) {
    // a > 0 so that pow stays real; b crosses zero for the backward ops and divides without 0.
    const Tensor a = uniform({5, 3, 7}, dtype, 0.25, 3.0);
    const Tensor b = uniform({5, 3, 7}, dtype, -2.0, 2.0);
    const Tensor b_row = uniform({7}, dtype, 0.5, 2.0);            // broadcast along the outer dims
    const Tensor a_column = uniform({5, 1, 1}, dtype, 0.25, 3.0);  // a broadcast first operand
    for (BinaryOp op : kArithmeticOps) {
      CAPTURE(dtype);
      INFO(binary_op_name(op));
      const double alpha = op == BinaryOp::sub ? 0.5 : 2.0;  // only add and sub read it
      check_binary(op, a, b, alpha, Layout::contiguous, Layout::contiguous, Layout::contiguous);
      check_binary(op, a, b, alpha, Layout::transposed, Layout::strided, Layout::transposed);
      check_binary(op, a, b_row, alpha, Layout::strided, Layout::contiguous, Layout::strided);
      check_binary(op, a_column, b, alpha, Layout::contiguous, Layout::transposed, Layout::contiguous);
      check_binary(op, a, scalar_tensor(1.5, {dtype}), alpha, Layout::transposed, Layout::contiguous,
                   Layout::contiguous);
    }
  }
}

TEST_CASE("comparisons give the CPU's bools in every dtype, ties included") {
  for (DType dtype : kAllDtypes) {
    const bool is_bool = dtype == DType::boolean;
    const Tensor a = small_integers({6, 1, 5}, dtype, 0, is_bool ? 2 : 4);
    const Tensor b = small_integers({4, 5}, dtype, 0, is_bool ? 2 : 4);
    for (BinaryOp op : kComparisons) {
      CAPTURE(dtype);
      INFO(binary_op_name(op));
      check_binary(op, a, b, 1.0, Layout::contiguous, Layout::contiguous, Layout::contiguous);
      check_binary(op, a, b, 1.0, Layout::strided, Layout::transposed, Layout::transposed);
    }
  }
}

TEST_CASE("integer arithmetic matches the CPU exactly") {
  // Division by zero traps on the CPU and integer pow goes through double, so those two are left
  // to the floating tests.
  for (DType dtype : {DType::i64, DType::i32, DType::u8}) {
    const Tensor a = small_integers({5, 7}, dtype, 0, 100);
    const Tensor b = small_integers({7}, dtype, 0, 100);
    for (BinaryOp op :
         {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::maximum, BinaryOp::minimum, BinaryOp::relu_backward}) {
      CAPTURE(dtype);
      INFO(binary_op_name(op));
      check_binary(op, a, b, 2.0, Layout::transposed, Layout::contiguous, Layout::strided);
    }
  }
}

TEST_CASE("copy converts between every pair of dtypes exactly as the CPU does") {
  // Halves in [0, 100): every integer dtype holds them after truncation, some are 0 (false).
  const Tensor halves = small_integers({6, 9}, DType::f64, 0, 200) * 0.5;
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      CAPTURE(from);
      CAPTURE(to);
      const Tensor source = halves.to(from);
      for (Layout in_layout : kLayouts) {
        INFO("source ", layout_name(in_layout));
        const Tensor out_cpu = laid_out(zeros({6, 9}, {to}), Device::cpu(), Layout::transposed);
        const Tensor out_gpu = laid_out(zeros({6, 9}, {to}), gpu(), Layout::transposed);
        kernels::copy(out_cpu, laid_out(source, Device::cpu(), in_layout));
        kernels::copy(out_gpu, laid_out(source, gpu(), in_layout));
        test::check_matches_cpu(out_gpu, out_cpu, 0.0);
      }
    }
  }
  // Values with more bits than the target keeps: f64 and f32 with full mantissas, i64 and i32
  // past 2^24 (for f16: past 2^11, within its range, so nothing overflows to inf). The 16-bit
  // targets take f64, i64 and i32 through round_to_odd_float on both devices (core/convert_math.h).
  const Tensor wide_floats = randn({6, 9}, {DType::f64}, &test::rng()) * 1000.0;
  for (DType to : {DType::f32, DType::f16, DType::bf16}) {
    const int64_t i64_limit = to == DType::f16 ? 60000 : int64_t(1) << 40;
    const int64_t i32_limit = to == DType::f16 ? 60000 : int64_t(1) << 30;
    const Tensor sources[] = {
        wide_floats, wide_floats.to(DType::f32),
        randint(-i64_limit, i64_limit, {6, 9}, {DType::i64, Device::cpu()}, &test::rng()),
        randint(-i32_limit, i32_limit, {6, 9}, {DType::i64, Device::cpu()}, &test::rng()).to(DType::i32)};
    for (const Tensor& source : sources) {
      CAPTURE(source.dtype());
      CAPTURE(to);
      const Tensor out_cpu = zeros({6, 9}, {to});
      const Tensor out_gpu = zeros({6, 9}, {to, gpu()});
      kernels::copy(out_cpu, source);
      kernels::copy(out_gpu, source.to(gpu()));
      test::check_matches_cpu(out_gpu, out_cpu, 0.0);
    }
  }
}

TEST_CASE("copy_ broadcasts its source into a strided destination on the GPU") {
  const Tensor row = uniform({1, 9}, DType::f32, -1.0, 1.0);
  Tensor expected = zeros({5, 18}, {DType::f64}).slice(1, 0, 18, 2);
  expected.copy_(row);
  Tensor on_gpu = zeros({5, 18}, {DType::f64, gpu()}).slice(1, 0, 18, 2);
  on_gpu.copy_(row.to(gpu()));
  test::check_matches_cpu(on_gpu, expected, 0.0);
}

TEST_CASE("odd sizes, from empty to past one grid of blocks, are covered exactly once") {
  // 17000003 elements need more than the launcher's 65536 blocks of 256 threads, so the
  // grid-stride loop takes a second lap.
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000003), int64_t(17000003)}) {
    CAPTURE(n);
    const Tensor x = uniform({n}, DType::f32, -2.0, 2.0);
    const Tensor y = uniform({n}, DType::f32, -2.0, 2.0);
    const Tensor sum_gpu = empty({n}, {DType::f32, gpu()});
    const Tensor sum_cpu = empty({n}, {DType::f32});
    kernels::binary(BinaryOp::add, sum_gpu, x.to(gpu()), y.to(gpu()), 1.0);
    kernels::binary(BinaryOp::add, sum_cpu, x, y, 1.0);
    const Tensor converted_gpu = empty({n}, {DType::f16, gpu()});
    const Tensor converted_cpu = empty({n}, {DType::f16});
    kernels::copy(converted_gpu, x.to(gpu()));
    kernels::copy(converted_cpu, x);
    // One f32 add and one rounding to f16 per element: identical on both devices.
    CHECK(test::max_abs_diff(sum_gpu.to(Device::cpu()), sum_cpu) == 0.0);
    CHECK(test::max_abs_diff(converted_gpu.to(Device::cpu()), converted_cpu) == 0.0);
  }
}

TEST_CASE("fill writes every dtype, converting the value as copy does, and leaves the gaps of a view alone") {
  for (DType dtype : kAllDtypes) {
    CAPTURE(dtype);
    for (double value : {2.5, 0.0, 100.75}) {
      CAPTURE(value);
      // The whole buffer is compared, so a write into the gaps between the view's elements shows.
      const Tensor buffer_cpu = small_integers({5, 14}, dtype, 0, 2);
      const Tensor buffer_gpu = buffer_cpu.to(gpu());
      kernels::fill(buffer_cpu.slice(1, 1, 14, 2).transpose(0, 1), value);
      kernels::fill(buffer_gpu.slice(1, 1, 14, 2).transpose(0, 1), value);
      test::check_matches_cpu(buffer_gpu, buffer_cpu, 0.0);
    }
  }
}

TEST_CASE("clamp matches the CPU with either bound, both, crossed bounds and NaN") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::pair<std::optional<double>, std::optional<double>> bounds[] = {
      {-0.5, 0.75}, {0.25, std::nullopt}, {std::nullopt, -0.25}, {1.0, -1.0}};
  for (DType dtype : kFloatingDtypes) {
    Tensor x = uniform({4, 9}, DType::f64, -2.0, 2.0);
    x.select(0, 1).select(0, 3).fill_(nan);
    x = x.to(dtype);
    for (const auto& [lo, hi] : bounds) {
      CAPTURE(dtype);
      INFO("min ", lo.value_or(-1e300), ", max ", hi.value_or(1e300));
      const Tensor out_cpu = zeros({4, 9}, {dtype});
      const Tensor out_gpu = zeros({4, 9}, {dtype, gpu()});
      kernels::clamp(out_cpu, laid_out(x, Device::cpu(), Layout::transposed), lo, hi);
      kernels::clamp(out_gpu, laid_out(x, gpu(), Layout::transposed), lo, hi);
      test::check_matches_cpu(out_gpu, out_cpu);
    }
  }
  for (DType dtype : {DType::i64, DType::i32, DType::u8}) {
    CAPTURE(dtype);
    const Tensor x = small_integers({4, 9}, dtype, 0, 100);
    const Tensor out_cpu = zeros({4, 9}, {dtype});
    const Tensor out_gpu = zeros({4, 9}, {dtype, gpu()});
    kernels::clamp(out_cpu, x, 20.0, 70.0);
    kernels::clamp(out_gpu, x.to(gpu()), 20.0, 70.0);
    test::check_matches_cpu(out_gpu, out_cpu, 0.0);
  }
}

TEST_CASE("where selects by a broadcast condition in every dtype") {
  const Tensor condition = gt(rand({5, 1, 7}, {DType::f32}, &test::rng()), 0.5);
  for (DType dtype : kAllDtypes) {
    CAPTURE(dtype);
    const Tensor a = small_integers({5, 3, 7}, dtype, 0, 50);
    const Tensor b = small_integers({7}, dtype, 50, 100);
    const Tensor out_cpu = zeros({5, 3, 7}, {dtype});
    const Tensor out_gpu = laid_out(zeros({5, 3, 7}, {dtype}), gpu(), Layout::transposed);
    kernels::where(out_cpu, condition, laid_out(a, Device::cpu(), Layout::strided), b);
    kernels::where(out_gpu, condition.to(gpu()), laid_out(a, gpu(), Layout::strided), b.to(gpu()));
    test::check_matches_cpu(out_gpu, out_cpu, 0.0);
  }
}

TEST_CASE("the tensor API runs pointwise ops on the GPU and keeps results there") {
  const Tensor a = uniform({8, 6}, DType::f32, -1.0, 1.0), b = uniform({6}, DType::f32, 0.5, 1.5);
  const auto compute = [](const Tensor& x, const Tensor& y) {
    return where(gt(x, 0.0), (add(x, y, 0.5) * y).exp(), maximum(x, y).gelu()).clamp(-0.1, 2.0);
  };
  const Tensor on_gpu = compute(a.to(gpu()), b.to(gpu()));
  CHECK(on_gpu.device() == gpu());
  test::check_matches_cpu(on_gpu, compute(a, b));
}

TEST_CASE("a GPU kernel given a CPU operand refuses it, naming the op and both devices") {
  const Tensor out = zeros({3}, {DType::f32, gpu()});
  const Tensor on_gpu = zeros({3}, {DType::f32, gpu()});
  const Tensor on_cpu = zeros({3}, {DType::f32});
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::add, out, on_gpu, on_cpu, 1.0),
                       doctest::Contains("binary: expected every tensor on cuda:0"), Error);
  CHECK_THROWS_WITH_AS(kernels::binary(BinaryOp::add, out, on_gpu, on_cpu, 1.0), doctest::Contains("on cpu"), Error);
}
