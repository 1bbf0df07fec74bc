#pragma once
// defines: dist::PowerSGDOptions, powerSGD_hook — PyTorch's PowerSGD communication hook
//          (ddp_comm_hooks/powerSGD_hook.py, Vogels et al. 2019): each gradient matrix is sent as
//          two thin factors of rank r, with the approximation's error fed back into the next step.
//          For DistributedDataParallel::register_comm_hook (dist/comm_hook.h, docs/ddp.md).
#include <cstdint>

#include "dist/comm_hook.h"

namespace sg::dist {

// PyTorch's PowerSGDState, whose defaults these are.
struct PowerSGDOptions {
  int matrix_approximation_rank = 1;  // r: each [n, m] gradient travels as [n, r] and [m, r]
  // Synchronised backwards averaged exactly (allreduce_hook) before compression starts: early
  // training moves fast, and compressing it hurts accuracy.
  int64_t start_powerSGD_iter = 1000;
  // A gradient is compressed only if (n + m) r * this < n m; others (and every 1-D one) are
  // averaged exactly.
  double min_compression_rate = 2;
  // Keep what the approximation left out of this rank's gradient and add it to the next one, so
  // that nothing is lost for good, only delayed.
  bool use_error_feedback = true;
  // Start each power iteration from the last step's Q rather than a fresh random one.
  bool warm_start = true;
  uint64_t random_seed = 0;  // of the random Q, the same on every rank
};

// A hook with its own state (the step count, per bucket the error and the Q factors): register
// one per DDP. Each synchronised backward, for each compressed gradient M ([n, m], its first
// dimension by the rest): P = M Q, all-reduced; P orthonormalised (Gram-Schmidt); Q = M^T P,
// all-reduced; the average is P Q^T / world. f32 and f64 buckets only.
CommHook powerSGD_hook(PowerSGDOptions options = {});

}  // namespace sg::dist
