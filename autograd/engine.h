#pragma once
// defines: run_backward — the backward engine.
#include "core/tensor.h"

namespace sg::autograd {

// Propagates `gradient` (ones for a scalar root when undefined) from `root` to every leaf that
// requires grad, accumulating into their .grad. Frees the graph unless `retain_graph`.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace sg::autograd
