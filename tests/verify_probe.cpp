// A small training program for `sgrun --verify` (tests/test_data_parallel_verification.cpp), with
// one planted cause of disagreement per mode. Usage: verify_probe MODE
//   sgd           an MLP trained with SGD on a fixed random dataset: data parallel = large batch
//   bn            the same with a BatchNorm1d, without SyncBatchNorm
//   sync-bn       with the BatchNorm1d converted to SyncBatchNorm
//   summed-loss   the loss summed over the batch instead of averaged
//   dropout       a Dropout layer, every rank seeded alike (so each draws other masks for its samples)
//   world-seeded  the initial weights seeded with the number of ranks
#include <cstdio>
#include <memory>
#include <string>

#include "syncgrad.h"

using namespace sg;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  dist::AcceleratorOptions options;
  options.sync_batchnorm = mode == "sync-bn";
  dist::Accelerator accelerator(options);
  manual_seed(mode == "world-seeded" ? accelerator.num_processes() : 1);
  Generator data(7);
  auto dataset =
      std::make_shared<data::TensorDataset>(randn({512, 6}, {}, &data), randint(0, 3, {512}, {DType::i64}, &data));
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(6, 16));
  if (mode == "bn" || mode == "sync-bn") model->push_back(std::make_shared<nn::BatchNorm1d>(16));
  model->push_back(std::make_shared<nn::ReLU>());
  if (mode == "dropout") model->push_back(std::make_shared<nn::Dropout>(0.3));
  model->push_back(std::make_shared<nn::Linear>(16, 3));
  auto prepared = accelerator.prepare(std::shared_ptr<nn::Module>(model));
  optim::SGD optimizer(prepared->parameters(), {.lr = 0.1, .momentum = 0.9});
  accelerator.prepare(optimizer);
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 16, .shuffle = true, .seed = 3});
  for (const data::Batch& batch : loader) {
    Tensor loss = nn::functional::cross_entropy((*prepared)(batch.input), batch.target);
    if (mode == "summed-loss") loss = loss * static_cast<double>(batch.input.size(0));
    accelerator.backward(loss);
    accelerator.step(optimizer);
    accelerator.zero_grad(optimizer);
  }
  std::printf("the epoch ended before sgrun --verify stopped the run\n");
  return 0;
}
