#pragma once
// defines: copy_elements, contiguous_plain — row-major copies written as plain loops.
//
// Note [Data code does not use the thread pool]
// Dataset::get, transforms and collate run on DataLoader worker threads, which stay apart from
// the OpenMP pool (docs/tensor.md, Threads and determinism): a worker that entered an OpenMP
// region would start a second team of threads competing with the training step for the same
// cores. So data/ copies
// and converts with the plain loops below instead of calling the core kernels (whose copy runs
// through parallel_for), and each worker also sizes its own OpenMP team to one thread in case
// user code calls an op (see dataloader.cpp).
#include "core/tensor.h"

namespace sg::data {

// Writes the elements of `src` (any strides, CPU) to `dst` in row-major order; one memcpy when
// `src` is contiguous. `dst` must hold src.numel() * src.element_size() bytes.
void copy_elements(void* dst, const Tensor& src);

// `t` itself when contiguous, otherwise a contiguous copy made with copy_elements.
Tensor contiguous_plain(const Tensor& t);

}  // namespace sg::data
