#pragma once
// defines: what the DDP and SyncBatchNorm tests run both in the worker processes
//          (tests/dist_worker_ddp.cpp) and, as the single-process reference, in the test itself.
#include <memory>
#include <string>

#include "syncgrad.h"

namespace sg::test::ddp {

constexpr int64_t kGlobalBatch = 64;
constexpr int kSteps = 5;

// A small MLP whose parameters differ in size (a 32x32 weight of 4 KiB, biases of 16-128 bytes),
// so a small bucket cap gives one bucket per large weight and packs the tiny ones together.
// `seed` fixes the initial weights.
std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed);

// Step `step`'s global batch: inputs [kGlobalBatch, 10], targets [kGlobalBatch, 4].
std::pair<Tensor, Tensor> batch(int step);

// Rows [begin, end) of the global batch: what `rank` of `world` trains on (equal shares).
std::pair<int64_t, int64_t> shard(int rank, int world, int64_t global);

// Trains `model` for kSteps SGD steps (lr 0.05, momentum 0.9) on rows [begin, end) of each
// global batch, with an MSE loss averaged over those rows. With `micro_batches` > 1, each step
// accumulates that many equal parts, every part's loss divided by micro_batches; `on_part` runs
// each part's forward+backward (DDP passes one that wraps all but the last in no_sync). The
// batches are moved to `device`, where the model lives. Each step starts with
// zero_grad(set_grads_to_none).
using PartStep = std::function<void(int part, int parts, const std::function<void()>& forward_backward)>;
void train(nn::Module& model, int64_t begin, int64_t end, int micro_batches, const PartStep& on_part,
           Device device = Device::cpu(), bool set_grads_to_none = true);

// A Linear(10, 6) followed by BatchNorm1d(6), for the buffer-broadcast test.
std::shared_ptr<nn::Sequential> make_linear_batch_norm();

// The BatchNorm input and the weights of the loss sum(out * G) used by the SyncBatchNorm test.
constexpr int64_t kBnBatch = 8, kBnChannels = 3;
std::pair<Tensor, Tensor> batch_norm_data();

}  // namespace sg::test::ddp
