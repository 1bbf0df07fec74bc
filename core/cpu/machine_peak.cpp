#include "core/cpu/machine_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "core/generator.h"
#include "core/kernels/gemm.h"
#include "core/parallel.h"

namespace sg::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// Independent chains of x = x * scale + shift, as many as keep both FMA units of a core busy: an FMA
// takes 4 cycles on recent x86 cores and two start each cycle, so 8 chains are in flight at any time;
// 12 leave a margin and still fit in the 16 vector registers AVX2 has, with the two constants.
constexpr int kChains = 12;
// x -> 0.999 x + 0.001 stays near 1: no overflow, no subnormals that would slow the loop down.
constexpr float kScale = 0.999f, kShift = 0.001f;

// GCC's vector extensions: f32 vectors of 4, 8 and 16 lanes.
using Float4 = float __attribute__((vector_size(16)));
using Float8 = float __attribute__((vector_size(32)));
using Float16 = float __attribute__((vector_size(64)));

// The chains on one kind of vector: GCC fuses x * scale + shift into one FMA instruction where the target has
// one (-ffp-contract=fast, its default for C++). Always inlined, so that it is compiled for the caller's target.
template <typename Vector>
[[gnu::always_inline]] inline float fma_chains(int64_t iterations) {
  Vector x[kChains];
  // Starting values 2, 3, ...: a chain starting at 1, the loop's fixed point, would be folded away.
  for (int c = 0; c < kChains; ++c) x[c] = Vector{} + static_cast<float>(c + 2);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) x[c] = x[c] * kScale + kShift;
  for (int c = 1; c < kChains; ++c) x[0] += x[c];
  float sum = 0;
  for (size_t lane = 0; lane < sizeof(Vector) / sizeof(float); ++lane) sum += x[0][lane];
  return sum;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations) {
  return fma_chains<Float16>(iterations);
}
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations) { return fma_chains<Float8>(iterations); }
#endif
// Any other CPU: 4 lanes, an FMA where the target has one, else a multiply and an add (2 FLOPs either way).
float fma_chains_128bit(int64_t iterations) { return fma_chains<Float4>(iterations); }

struct FmaLoop {
  const char* vector_width;
  int lanes;
  float (*run)(int64_t iterations);
  double flops(int64_t iterations) const { return 2.0 * kChains * lanes * static_cast<double>(iterations); }
};

FmaLoop widest_fma_loop() {
#if defined(__x86_64__) || defined(__i386__)
  // GCC's builtins read cpuid and check with xgetbv that the OS saves the wide registers.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"AVX-512 (16 f32 lanes)", 16, fma_chains_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"AVX2 (8 f32 lanes)", 8, fma_chains_avx2};
#endif
  return {"128-bit (4 f32 lanes)", 4, fma_chains_128bit};
}

// Where the loops' results go, so that the compiler cannot drop the loops as unused.
volatile float fma_result_sink = 0;

// Seconds for every one of the pool's threads to run `iterations` of the loop at the same time.
double time_fma_loop(const FmaLoop& loop, int threads, int64_t iterations) {
  std::vector<float> results(static_cast<size_t>(threads));
  const auto start = Clock::now();
  parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) results[static_cast<size_t>(t)] = loop.run(iterations);
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (float result : results) fma_result_sink = fma_result_sink + result;
  return seconds;
}

// The FMA ceiling in GFLOP/s: the best of 12 runs of ~3 ms on all threads. Short runs, many of them: on
// shared cores, a run counts only if every thread kept its core for all of it.
double fma_ceiling_gflops(const FmaLoop& loop, int threads) {
  int64_t iterations = 1 << 12;
  double seconds = time_fma_loop(loop, 1, iterations);
  while (seconds < 1e-3) {  // long enough to scale from; also wakes the cores up
    iterations *= 2;
    seconds = time_fma_loop(loop, 1, iterations);
  }
  iterations = static_cast<int64_t>(static_cast<double>(iterations) * 3e-3 / seconds);
  double best = time_fma_loop(loop, threads, iterations);
  for (int run = 1; run < 12; ++run) best = std::min(best, time_fma_loop(loop, threads, iterations));
  return threads * loop.flops(iterations) / best / 1e9;
}

// f32 C = A B at n = 1024 through the library's GEMM kernel: the best of five calls after a warm-up
// (which loads OpenBLAS, allocates its buffers and touches the output's pages).
double gemm_gflops() {
  constexpr int64_t n = 1024;
  Generator generator(1024);
  const Tensor a = randn({n, n}, {}, &generator), b = randn({n, n}, {}, &generator);
  const Tensor out = empty({n, n});
  kernels::gemm(out, a, b);
  double best = 1e30;
  for (int call = 0; call < 5; ++call) {
    const auto start = Clock::now();
    kernels::gemm(out, a, b);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 2.0 * static_cast<double>(n * n * n) / best / 1e9;
}

}  // namespace

std::string MachinePeak::str() const {
  char text[200];
  std::snprintf(text, sizeof text, "FMA ceiling %.1f GFLOP/s (%s), GEMM n=1024 %.1f GFLOP/s, %d thread(s)", fma_gflops,
                vector_width.c_str(), gemm_gflops, threads);
  return text;
}

MachinePeak measure_machine_peak(int threads) {
  SG_CHECK(threads >= 0, "measure_machine_peak: expected a thread count >= 0 (0: the current one), got ", threads);
  const int previous_threads = get_num_threads();
  if (threads == 0) threads = previous_threads;
  set_num_threads(threads);
  MachinePeak peak;
  peak.threads = threads;
  const FmaLoop loop = widest_fma_loop();
  peak.vector_width = loop.vector_width;
  peak.fma_gflops = fma_ceiling_gflops(loop, threads);
  peak.gemm_gflops = gemm_gflops();
  set_num_threads(previous_threads);
  return peak;
}

}  // namespace sg::cpu
