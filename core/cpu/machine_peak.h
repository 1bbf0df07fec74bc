#pragma once
// defines: cpu::MachinePeak, cpu::measure_machine_peak — the f32 FLOP/s this CPU reaches at a thread
//          count, measured in the running process: the two denominators of model FLOPs utilisation.
//
// Note [Two peaks for MFU]
// MFU (model FLOPs utilisation) is the model's FLOPs per second divided by what the hardware can do.
// nanoGPT and llm.c divide by the GPU's data-sheet peak; a CPU has no trustworthy data sheet here (a
// virtual machine reports a nominal clock, turbo and AVX-512 frequency licences move the real one,
// other tenants share the cores), so both peaks are measured, at the thread count the step runs on:
// - the FMA ceiling: every thread runs a loop of independent vector FMAs that never touches memory, at
//   the widest width the CPU runs (AVX-512, else AVX2, else 128-bit vectors). Nothing computes f32
//   faster on these cores; a step at 100% of it would be all FMAs with no memory traffic at all.
// - the GEMM rate: a 1024 x 1024 x 1024 f32 matrix product through kernels::gemm, the kernel every
//   Linear layer, attention product and convolution of syncgrad runs on. It is the best a real kernel
//   with real loads and stores gets out of the FMA units here (always below the ceiling: it also loads,
//   packs and stores), so MFU against it says how far the step is from "nothing but large matrix products".
// Both are best-of-several so that a moment of load from other processes does not lower them.
#include <string>

namespace sg::cpu {

struct MachinePeak {
  int threads = 0;
  std::string vector_width;  // "AVX-512 (16 f32 lanes)", "AVX2 (8 f32 lanes)" or "128-bit (4 f32 lanes)"
  double fma_gflops = 0;     // the FMA ceiling, all threads together
  double gemm_gflops = 0;    // f32 GEMM n = 1024 through kernels::gemm, all threads together

  // "FMA ceiling 181.2 GFLOP/s (AVX-512 (16 f32 lanes)), GEMM n=1024 150.3 GFLOP/s, 2 thread(s)"
  std::string str() const;
};

// Measures both peaks at `threads` intra-op threads (sg::get_num_threads() when 0), which it leaves
// set as they were. Takes about 0.1-0.3 s: the FMA loop runs ~40 ms, the GEMM a warm-up and five calls.
MachinePeak measure_machine_peak(int threads = 0);

}  // namespace sg::cpu
