#pragma once
// defines: run_backward — the backward engine; run_nested_backward — one inside a node's backward; queue_callback —
// work to do when it finishes.
#include <functional>

#include "core/tensor.h"

namespace sg::autograd {

// Propagates `gradient` (ones for a scalar root when undefined) from `root` to every leaf that
// requires grad, accumulating into their .grad. Frees the graph unless `retain_graph`.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// run_backward from inside a node's backward (autograd::checkpoint backpropagates its recomputed
// segment this way). The callbacks queued meanwhile join those of the running backward, so they
// still run once, after the whole pass: DDP's "wait for every bucket" must not run after one segment.
void run_nested_backward(const Tensor& root, const Tensor& gradient);

// Runs `callback` once the backward pass running on this thread has processed its last node
// (PyTorch's Engine::queue_callback). DDP queues its "wait for every bucket and write the
// averaged gradients into .grad" step here from inside a gradient hook. Throws outside backward.
void queue_callback(std::function<void()> callback);

// Where a backward function should write its gradient for input `input` of its node, of `shape`
// and like's dtype and device (Note [A gradient written where it lands] in autograd/engine.cpp):
// when that input is a leaf whose gradient has a home, or one view op's result of such a leaf (a
// Linear's weight.t()), and nothing has reached the home yet in this pass, the home as that input
// sees it (for weight.t(), home.t(): possibly not contiguous). Otherwise, and outside a backward
// pass: undefined. A backward function asks for one input at most.
Tensor gradient_home(size_t input, const Shape& shape, const Tensor& like);

// gradient_home when it is contiguous, otherwise a new tensor: for a backward function that writes
// a contiguous result (conv2d's weight gradient).
Tensor gradient_output(size_t input, const Shape& shape, const Tensor& like);

}  // namespace sg::autograd
