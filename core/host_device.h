#pragma once
// defines: SG_HOST_DEVICE — marks per-element helpers that the CPU kernels call and that nvcc
//          also compiles for the GPU, so one definition (and the CPU tests) covers both.
#ifdef __CUDACC__
#define SG_HOST_DEVICE __host__ __device__
#else
#define SG_HOST_DEVICE
#endif
