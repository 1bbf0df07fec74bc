#include "train/virtual_ranks.h"

#include "autograd/grad_mode.h"
#include "autograd/ops_index.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/generator.h"
#include "dist/dist.h"
#include "dist/process_group.h"

namespace sg::dist {

VirtualRanks::VirtualRanks(int virtual_ranks, std::shared_ptr<const data::Dataset> dataset,
                           const data::DataLoaderOptions& options, nn::Module& model)
    : dataset_(std::move(dataset)),
      seed_(options.seed),
      processes_(get_world_size()) {
  SG_CHECK(dataset_ != nullptr, "VirtualRanks: the dataset is null");
  SG_CHECK(virtual_ranks >= 1 && virtual_ranks % processes_ == 0, "VirtualRanks: ", processes_,
           " processes must divide the ", virtual_ranks,
           " virtual ranks, so that each trains the same number of shards");
  const int per_process = virtual_ranks / processes_;
  first_shard_ = get_rank() * per_process;
  for (int shard = get_rank() * per_process; shard < (get_rank() + 1) * per_process; ++shard)
    shards_.push_back(std::make_shared<data::DistributedBatchSampler>(
        std::make_shared<data::DistributedSampler>(dataset_->size(), virtual_ranks, shard, options.shuffle,
                                                   options.seed),
        options.batch_size, options.drop_last, /*even_batches=*/true));
  SG_CHECK(steps_per_epoch() > 0, "VirtualRanks: ", dataset_->size(), " examples make no batch of ", options.batch_size,
           " per virtual rank");
  if (processes_ > 1)
    for (const Tensor& param : model.parameters()) {
      Tensor data = param.detach();
      broadcast(data);
    }
}

double VirtualRanks::gradient(nn::Module& model, int64_t step,
                              const std::function<Tensor(const data::Batch&)>& loss_of) {
  SG_CHECK(step >= 0, "VirtualRanks::gradient: step ", step, " is negative");
  const int64_t epoch = step / steps_per_epoch(), batch = step % steps_per_epoch();
  const TensorList params = model.parameters();
  // Row k: shard k of this process's flat gradient, then its loss.
  TensorList rows;
  Generator& generator = default_generator();
  const Generator saved = generator;
  for (size_t k = 0; k < shards_.size(); ++k) {
    const auto& shard = shards_[k];
    // The shard's own random stream (Note [Virtual ranks]); a step draws far fewer than 2^32 blocks.
    generator.manual_seed(seed_ + 0x9E3779B97F4A7C15ull * (first_shard_ + k + 1));
    generator.set_offset(static_cast<uint64_t>(step) << 32);
    std::vector<data::Example> examples;
    const std::vector<std::vector<int64_t>> epoch_batches = shard->batches(epoch);
    for (int64_t index : epoch_batches[static_cast<size_t>(batch)]) examples.push_back(dataset_->get(index));
    model.zero_grad();
    const Tensor loss = loss_of(data::default_collate(examples));
    loss.backward();
    TensorList parts;
    for (const Tensor& param : params)
      parts.push_back(param.grad().defined() ? param.grad().reshape({-1})
                                             : zeros({param.numel()}, {param.dtype(), param.device()}));
    parts.push_back(loss.detach().reshape({1}));
    rows.push_back(cat(parts));
  }
  generator = saved;
  NoGradGuard no_grad;
  const Tensor local = stack(rows);  // [V / N, P + 1]
  std::vector<Tensor> gathered{local};
  if (processes_ > 1) {
    gathered.assign(static_cast<size_t>(processes_), Tensor());
    for (Tensor& part : gathered) part = empty(local.sizes(), {local.dtype(), local.device()});
    default_group().all_gather(gathered, local)->wait();
  }
  const Tensor all = cat(gathered);  // [V, P + 1], shard order: process r holds shards r·V/N ..
  Tensor sum = all.select(0, 0).clone();
  for (int64_t shard = 1; shard < all.size(0); ++shard) sum = sum + all.select(0, shard);  // fixed order
  sum = sum / static_cast<double>(all.size(0));
  int64_t offset = 0;
  for (Tensor param : params) {  // a handle: setting its gradient sets the parameter's
    param.set_grad(sum.narrow(0, offset, param.numel()).reshape(param.sizes()).clone());
    offset += param.numel();
  }
  return sum.select(0, offset).item();
}

}  // namespace sg::dist
