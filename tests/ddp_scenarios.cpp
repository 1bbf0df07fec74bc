#include "ddp_scenarios.h"

namespace sg::test::ddp {

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  Generator generator(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(10, 32, true, &generator), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(32, 32, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(32, 4, true, &generator)});
}

std::shared_ptr<nn::Sequential> make_linear_batch_norm() {
  Generator generator(9);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(10, 6, true, &generator), std::make_shared<nn::BatchNorm1d>(6)});
}

std::pair<Tensor, Tensor> batch(int step) {
  Generator generator(1000 + step);
  Tensor x = randn({kGlobalBatch, 10}, {}, &generator);
  Tensor y = randn({kGlobalBatch, 4}, {}, &generator);
  return {x, y};
}

std::pair<int64_t, int64_t> shard(int rank, int world, int64_t global) {
  const int64_t share = global / world;
  return {rank * share, (rank + 1) * share};
}

void train(nn::Module& model, int64_t begin, int64_t end, int micro_batches, const PartStep& on_part, Device device,
           bool set_grads_to_none) {
  optim::SGD optimizer(model.parameters(), {.lr = 0.05, .momentum = 0.9});
  const int64_t part_rows = (end - begin) / micro_batches;
  for (int step = 0; step < kSteps; ++step) {
    const auto [host_x, host_y] = batch(step);
    const Tensor x = host_x.to(device), y = host_y.to(device);
    optimizer.zero_grad(set_grads_to_none);
    for (int part = 0; part < micro_batches; ++part) {
      const int64_t from = begin + part * part_rows;
      on_part(part, micro_batches, [&, from] {
        Tensor loss = nn::functional::mse_loss(model(x.narrow(0, from, part_rows)), y.narrow(0, from, part_rows));
        (loss / static_cast<double>(micro_batches)).backward();
      });
    }
    optimizer.step();
  }
}

std::pair<Tensor, Tensor> batch_norm_data() {
  Generator generator(77);
  Tensor x = randn({kBnBatch, kBnChannels, 5, 4}, {DType::f64}, &generator) * 2.0 + 0.5;
  Tensor g = randn({kBnBatch, kBnChannels, 5, 4}, {DType::f64}, &generator);
  return {x, g};
}

}  // namespace sg::test::ddp
