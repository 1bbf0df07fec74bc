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

// The tensor a backward function writes its gradient for input `input` of its node into, when it
// allocates one (shape and dtype/device of `like`): a new one, or, where that input is a leaf whose
// gradient has a home and nothing has reached it yet, the home itself (Note [A gradient written
// where it lands] in autograd/engine.cpp). Outside a backward pass: a new one.
Tensor gradient_output(size_t input, const Shape& shape, const Tensor& like);

}  // namespace sg::autograd
