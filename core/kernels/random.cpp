#include "core/kernels/random.h"

#include <cmath>

#include "core/cpu/random_kernels.h"
#include "core/cuda/random_kernels.h"
#include "core/profiler.h"

// The device dispatch point for the random fills (see core/kernels/pointwise.cpp): each op turns
// its arguments into a RandomDraw, reserves its Philox blocks on the host generator and fills on
// the tensor's device. multinomial reserves its blocks the same way.
namespace sg::kernels {

namespace {

void fill_random(const Tensor& t, Generator& generator, const RandomDraw& draw, const char* op_name) {
  const profiler::RecordScope scope(op_name, profiler::Category::random, t);
  const bool on_cuda = runs_on_cuda(t.device(), op_name);
  const uint64_t first = generator.reserve(static_cast<uint64_t>((t.numel() + 1) / 2));
  if (on_cuda) {
    if constexpr (kCudaBuild) return cuda::random_fill(t, generator.seed(), first, draw, op_name);
  }
  cpu::random_fill(t, generator.seed(), first, draw, op_name);
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
  RandomDraw draw{.kind = RandomDraw::Kind::uniform};
  draw.low = low;
  draw.span = high - low;
  draw.grid = std::ldexp(1.0, significand_bits(t.dtype()));
  fill_random(t, generator, draw, "uniform_");
}

void normal_(const Tensor& t, double mean, double std, Generator& generator) {
  RandomDraw draw{.kind = RandomDraw::Kind::normal};
  draw.mean = mean;
  draw.std = std;
  fill_random(t, generator, draw, "normal_");
}

void randint_(const Tensor& t, int64_t low, int64_t high, Generator& generator) {
  RandomDraw draw{.kind = RandomDraw::Kind::randint};
  draw.int_low = low;
  draw.int_range = static_cast<uint64_t>(high - low);
  fill_random(t, generator, draw, "randint_");
}

void bernoulli_(const Tensor& t, double p, Generator& generator) {
  RandomDraw draw{.kind = RandomDraw::Kind::bernoulli};
  draw.p = p;
  fill_random(t, generator, draw, "bernoulli_");
}

void multinomial_with_replacement(const Tensor& out, const Tensor& probs, Generator& generator) {
  const profiler::RecordScope scope("multinomial", profiler::Category::random, probs);
  const bool on_cuda = runs_on_cuda(out.device(), "multinomial");
  const uint64_t first = generator.reserve(static_cast<uint64_t>((out.numel() + 1) / 2));
  if (on_cuda) {
    if constexpr (kCudaBuild) return cuda::multinomial_with_replacement(out, probs, generator.seed(), first);
  }
  cpu::multinomial_with_replacement(out, probs, generator.seed(), first);
}

}  // namespace sg::kernels
