#include <cmath>
#include <numbers>

#include "core/cpu/operands.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/random.h"

namespace sg::kernels {

namespace {

// Fills `t` with draw(i, block) for element i, where block is the Philox output for that
// element's counter; works on a contiguous scratch tensor when `t` is a strided view.
template <typename Draw>
void fill_random(const Tensor& t, Generator& generator, const char* op_name, Draw draw) {
  check_device_supported(t.device(), op_name);
  const int64_t n = t.numel();
  const uint64_t first = generator.reserve(static_cast<uint64_t>((n + 1) / 2));
  Tensor target = t.is_contiguous() ? t : Tensor(std::make_shared<TensorImpl>(
      std::make_shared<Storage>(n * t.element_size(), t.device()), 0, t.sizes(),
      contiguous_strides(t.sizes()), t.dtype()));
  SG_DISPATCH_ALL(t.dtype(), op_name, [&]<typename scalar_t>() {
    scalar_t* data = static_cast<scalar_t*>(target.raw_data());
    parallel_for(n, kParallelGrain / 8, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Generator::Block block = generator.philox(first + static_cast<uint64_t>(i / 2));
        data[i] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(draw(i % 2, block)));
      }
    });
  });
  if (!target.is_same(t)) copy(t, target);
}

double uniform01(int half, const Generator::Block& block) {
  return uniform_double(block.word[2 * half], block.word[2 * half + 1]);
}

// Significand bits of a floating dtype (53 for the others, which only truncate).
int significand_bits(DType dtype) {
  switch (dtype) {
    case DType::f32: return 24;
    case DType::f16: return 11;
    case DType::bf16: return 8;
    default: return 53;
  }
}

}  // namespace

void uniform_(const Tensor& t, double low, double high, Generator& generator) {
  // A draw keeps only as many bits as the dtype holds, rounded down, so storing it never rounds
  // up to 1 (bf16 would, for 1 draw in 512); PyTorch's uniform does the same.
  const double grid = std::ldexp(1.0, significand_bits(t.dtype()));
  fill_random(t, generator, "uniform_", [=](int half, const Generator::Block& block) {
    return low + (high - low) * (std::floor(uniform01(half, block) * grid) / grid);
  });
}

void normal_(const Tensor& t, double mean, double std, Generator& generator) {
  // Box-Muller: the two uniforms of a block give two independent normals (cos and sin).
  fill_random(t, generator, "normal_", [=](int half, const Generator::Block& block) {
    const double u1 = 1.0 - uniform01(0, block);  // (0, 1], so log is finite
    const double u2 = uniform01(1, block);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    return mean + std * radius * (half == 0 ? std::cos(angle) : std::sin(angle));
  });
}

void randint_(const Tensor& t, int64_t low, int64_t high, Generator& generator) {
  const auto range = static_cast<unsigned __int128>(high - low);
  fill_random(t, generator, "randint_", [=](int half, const Generator::Block& block) {
    const uint64_t bits = uint64_t(block.word[2 * half]) << 32 | block.word[2 * half + 1];
    return static_cast<double>(low + static_cast<int64_t>((bits * range) >> 64));  // Lemire's multiply-shift
  });
}

void bernoulli_(const Tensor& t, double p, Generator& generator) {
  fill_random(t, generator, "bernoulli_", [=](int half, const Generator::Block& block) {
    return uniform01(half, block) < p ? 1.0 : 0.0;
  });
}

}  // namespace sg::kernels
