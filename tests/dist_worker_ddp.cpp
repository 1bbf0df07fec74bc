// One rank of the DDP / SyncBatchNorm tests (tests/test_ddp.cpp starts one process per rank
// with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set). Usage:
//   dist_worker_ddp <scenario> <output dir> [scenario arguments]
// Each rank writes what the test compares into <output dir>; an sg::Error is printed to stderr
// and ends the process with exit code 3, which the error-path tests expect.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "ddp_scenarios.h"

using namespace sg;
namespace ddp = sg::test::ddp;

namespace {

// After a synchronised backward every .grad is a view into one of DDP's buckets.
void check_grads_are_bucket_views(const dist::DistributedDataParallel& ddp_model) {
  for (const auto& [name, p] : ddp_model.named_parameters()) {
    const auto& buckets = ddp_model.reducer().buckets();
    const bool in_a_bucket = std::any_of(buckets.begin(), buckets.end(), [&](const dist::Bucket& bucket) {
      return p.grad().defined() && p.grad().storage() == bucket.buffer.storage();
    });
    SG_CHECK(in_a_bucket, "rank ", dist::get_rank(), ": the gradient of ", name, " is not a view into a bucket");
  }
}

// make_mlp's layers (and parameter names) with a forward in two segments, the first checkpointed
// (nn::checkpoint_sequential): its parameters' gradients, and so DDP's hooks on them, arrive
// during the recomputation inside backward.
class CheckpointedMlp : public nn::Sequential {
public:
  explicit CheckpointedMlp(uint64_t seed) {
    const std::shared_ptr<nn::Sequential> mlp = ddp::make_mlp(seed);  // alive through the loop
    for (const std::shared_ptr<nn::Module>& layer : *mlp) push_back(layer);
  }
  Tensor forward(const Tensor& input) override { return nn::checkpoint_sequential(*this, 2, input); }
};

// Trains the MLP (checkpointed or not) under DDP; rank 0 saves the final parameters. Ranks start
// from different weights on purpose: DDP's construction must copy rank 0's to all.
// `set_grads_to_none` false zeroes the gradients in place between steps, so backward accumulates
// straight into the buckets.
void equivalence(const std::string& out, double bucket_cap_mb, int micro_batches, const std::string& trace,
                 bool set_grads_to_none, bool checkpointed) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const uint64_t seed = rank == 0 ? 1 : 100 + rank;
  auto ddp_model = std::make_shared<dist::DistributedDataParallel>(
      checkpointed ? std::make_shared<CheckpointedMlp>(seed) : std::shared_ptr<nn::Module>(ddp::make_mlp(seed)),
      dist::DDPOptions{.bucket_cap_mb = bucket_cap_mb, .trace_path = trace, .trace_steps = 2});
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  ddp::train(
      *ddp_model, begin, end, micro_batches,
      [&](int part, int parts, const std::function<void()>& step) {
        if (part + 1 < parts) {
          auto no_sync = ddp_model->no_sync();
          step();
        } else {
          step();
          check_grads_are_bucket_views(*ddp_model);
        }
      },
      Device::cpu(), set_grads_to_none);
  if (rank == 0) save_safetensors(out + "/params.safetensors", ddp_model->module().state_dict());
}

// A model whose forward takes two tensors and returns two, as minGPT's forward(idx, targets)
// returns (logits, loss): the MLP's prediction and its MSE against the targets.
class PredictAndScore : public nn::Module {
public:
  explicit PredictAndScore(uint64_t seed) { mlp = register_module("mlp", ddp::make_mlp(seed)); }
  using nn::Module::forward;
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& y) {
    Tensor prediction = (*mlp)(x);
    return {prediction, nn::functional::mse_loss(prediction, y)};
  }
  std::shared_ptr<nn::Sequential> mlp;
};

// The equivalence scenario's training, through DDP::call; rank 0 saves the MLP's parameters.
void two_inputs(const std::string& out) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  auto model = std::make_shared<PredictAndScore>(rank == 0 ? 1 : 100 + rank);
  dist::DistributedDataParallel ddp_model(model);
  optim::SGD optimizer(ddp_model.parameters(), {.lr = 0.05, .momentum = 0.9});
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  for (int step = 0; step < ddp::kSteps; ++step) {
    const auto [x, y] = ddp::batch(step);
    optimizer.zero_grad();
    const auto [prediction, loss] = ddp_model.call(
        [&] { return model->forward(x.narrow(0, begin, end - begin), y.narrow(0, begin, end - begin)); });
    SG_CHECK((prediction.sizes() == Shape{end - begin, 4}), "the first output is the prediction");
    loss.backward();
    optimizer.step();
  }
  if (rank == 0) save_safetensors(out + "/params.safetensors", model->mlp->state_dict());
}

// A model with two heads of which the forward uses one.
class TwoHeads : public nn::Module {
public:
  TwoHeads() {
    Generator generator(5);
    used = register_module("used", std::make_shared<nn::Linear>(10, 4, true, &generator));
    unused = register_module("unused", std::make_shared<nn::Linear>(10, 4, true, &generator));
  }
  Tensor forward(const Tensor& x) override { return (*used)(x); }
  std::shared_ptr<nn::Linear> used, unused;
};

void unused_parameters(const std::string& out, bool find_unused) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  auto model = std::make_shared<TwoHeads>();
  dist::DistributedDataParallel ddp_model(model, {.find_unused_parameters = find_unused});
  const auto [x, y] = ddp::batch(0);
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  nn::functional::mse_loss(ddp_model(x.narrow(0, begin, end - begin)), y.narrow(0, begin, end - begin)).backward();
  SG_CHECK(!model->unused->weight.grad().defined(), "the unused head got a gradient");
  if (rank == 0) save_safetensors(out + "/grads.safetensors", {{"used.weight", model->used->weight.grad()}});
}

void mismatched_models() {
  const int rank = dist::get_rank();
  Generator generator(3);
  auto model = std::make_shared<nn::Linear>(10, rank == 1 ? 5 : 4, true, &generator);
  dist::DistributedDataParallel ddp_model(model);
}

// The same model, but only rank 1 asks DDP to look for unused parameters: its end of backward
// would all-reduce which parameters got a gradient anywhere, a collective rank 0 never joins.
void mismatched_options() {
  Generator generator(3);
  auto model = std::make_shared<nn::Linear>(10, 4, true, &generator);
  dist::DistributedDataParallel ddp_model(model, {.find_unused_parameters = dist::get_rank() == 1});
}

// Rows [begin, end) of the BatchNorm batch for `rank`: 8 rows split 3, 3, 2 on three ranks
// (unequal on purpose) and 4, 4 on two.
std::pair<int64_t, int64_t> batch_norm_rows(int rank, int world) {
  if (world == 2) return {4 * rank, 4 * rank + 4};
  const int64_t begins[] = {0, 3, 6, 8};
  return {begins[rank], begins[rank + 1]};
}

void sync_batch_norm(const std::string& out) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  auto bn = std::make_shared<nn::BatchNorm2d>(ddp::kBnChannels);
  bn->to(DType::f64);
  {
    NoGradGuard no_grad;
    bn->weight.copy_(tensor(std::vector<double>{0.5, 1.5, -2.0}));
    bn->bias.copy_(tensor(std::vector<double>{0.1, -0.3, 0.7}));
  }
  SG_CHECK(dist::convert_sync_batchnorm(*bn) == 1, "convert_sync_batchnorm should convert one layer");
  const auto [x_all, g_all] = ddp::batch_norm_data();
  const auto [begin, end] = batch_norm_rows(rank, world);
  Tensor x = x_all.narrow(0, begin, end - begin).clone().requires_grad_();
  Tensor y = (*bn)(x);
  (y * g_all.narrow(0, begin, end - begin)).sum().backward();
  save_safetensors(out + "/rank" + std::to_string(rank) + ".safetensors", {{"out", y.detach()},
                                                                           {"grad_input", x.grad()},
                                                                           {"grad_weight", bn->weight.grad()},
                                                                           {"grad_bias", bn->bias.grad()},
                                                                           {"running_mean", bn->running_mean},
                                                                           {"running_var", bn->running_var}});
}

// BatchNorm statistics under DDP. Each rank normalises its own rows, so the statistics differ;
// every rank saves its buffers after a training step (they must be rank 0's by the end of
// backward) and after a training forward with no backward followed by an evaluation forward
// (the broadcast of that forward must land before the next one reads the buffers).
void buffers(const std::string& out) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::DistributedDataParallel ddp_model(ddp::make_linear_batch_norm());
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  const auto save_buffers = [&](const std::string& when) {
    const nn::NamedTensors named = ddp_model.module().named_buffers();
    save_safetensors(out + "/rank" + std::to_string(rank) + "_" + when + ".safetensors",
                     nn::StateDict(named.begin(), named.end()));
  };
  const Tensor x0 = ddp::batch(0).first.narrow(0, begin, end - begin);
  const Tensor x1 = ddp::batch(1).first.narrow(0, begin, end - begin);

  ddp_model(x0).pow(2.0).sum().backward();
  save_buffers("step");
  {
    NoGradGuard no_grad;
    ddp_model(x1);
    ddp_model.eval();
    ddp_model(x1);
  }
  save_buffers("no_grad");
}

// Rank 1 dies (exit code 9) after two training steps; rank 0 goes on with its third step, whose
// backward waits for a gradient all-reduce rank 1 will never join: it must fail naming rank 1.
void rank_dies() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::DistributedDataParallel ddp_model(ddp::make_mlp(1));
  optim::SGD optimizer(ddp_model.parameters(), {.lr = 0.05});
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  for (int step = 0; step < 3; ++step) {
    if (step == 2 && rank == 1) std::exit(9);
    const auto [x, y] = ddp::batch(step);
    optimizer.zero_grad();
    nn::functional::mse_loss(ddp_model(x.narrow(0, begin, end - begin)), y.narrow(0, begin, end - begin)).backward();
    optimizer.step();
  }
}

// Two steps of the Accelerator's f16 loss scaler: the step at which rank 1's gradients overflowed
// must be skipped on every rank, with the scale halved, and the next one taken everywhere.
// `loss_of` gives each step's loss on this rank's rows, made so that rank 1's gradients overflow at
// step 0. `averaged`: whether every gradient is a DDP average, so that the ranks agree without the
// scaler's all-reduce (Note [Ranks agree on skipping a step] in amp/grad_scaler.h).
void scaler_steps(dist::Accelerator& accelerator, optim::Optimizer& optimizer,
                  const std::function<Tensor(int step)>& loss_of, bool averaged) {
  const int rank = dist::get_rank();
  accelerator.prepare(optimizer);
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    accelerator.backward(loss_of(step));
    TensorList grads;
    for (const Tensor& p : optimizer.all_params()) grads.push_back(p.grad());
    SG_CHECK(accelerator.gradients_averaged_by_ddp(grads) == averaged, "rank ", rank, " step ", step,
             ": the gradients are ", averaged ? "not " : "", "all DDP averages");
    const bool stepped = accelerator.step(optimizer);
    SG_CHECK(stepped == (step == 1), "rank ", rank, " step ", step, ": stepped = ", stepped);
  }
  const amp::GradScaler& scaler = accelerator.scaler();
  SG_CHECK(scaler.get_scale() == 32768.0 && scaler.skipped_steps() == 1, "rank ", rank, ": scale ", scaler.get_scale(),
           ", skipped ", scaler.skipped_steps());
  std::cout << "rank " << rank << ": skipped 1, scale " << scaler.get_scale() << "\n";
}

// Mixed precision f16, with the scaler's diagnostics or without. Set field by field: designated
// initialisers of AcceleratorOptions make GCC 12 warn (wrongly) about DDPOptions' strings.
dist::AcceleratorOptions f16_options(bool diagnostics) {
  dist::AcceleratorOptions options;
  options.mixed_precision = "f16";
  options.amp_diagnostics = diagnostics;
  return options;
}

// The overflow comes from rank 1's own batch (an inf input at step 0), so DDP's average carries
// it to every rank and the scaler needs no all-reduce of its own. With `diagnostics` the
// accelerator also prints which gradients held inf/NaN and where they began.
void scaler_agreement(bool diagnostics) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::Accelerator accelerator(f16_options(diagnostics));
  const auto ddp_model = accelerator.prepare(ddp::make_mlp(1));
  optim::SGD optimizer(ddp_model->parameters(), {.lr = 0.05});
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  scaler_steps(
      accelerator, optimizer,
      [&](int step) {
        const auto [x, y] = ddp::batch(step);
        Tensor rows = x.narrow(0, begin, end - begin).clone();
        if (step == 0 && rank == 1) rows.view({-1}).narrow(0, 0, 1).fill_(INFINITY);
        return nn::functional::mse_loss((*ddp_model)(rows), y.narrow(0, begin, end - begin));
      },
      /*averaged=*/true);
}

// A parameter outside DDP (a learned output scale) has a local gradient, which overflows on
// rank 1 only: the scaler's all-reduce of the found-inf flag makes every rank skip that step.
void scaler_local_gradient(bool diagnostics) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::Accelerator accelerator(f16_options(diagnostics));
  const auto ddp_model = accelerator.prepare(ddp::make_mlp(1));
  Tensor output_scale = ones({1}).requires_grad_();
  TensorList params = ddp_model->parameters();
  params.push_back(output_scale);
  optim::SGD optimizer(params, {.lr = 0.05});
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  scaler_steps(
      accelerator, optimizer,
      [&](int step) {
        const auto [x, y] = ddp::batch(step);
        const Tensor prediction = (*ddp_model)(x.narrow(0, begin, end - begin));
        Tensor loss = nn::functional::mse_loss(prediction * output_scale, y.narrow(0, begin, end - begin));
        // d loss / d output_scale is inf on rank 1 at step 0; DDP's gradients stay finite.
        if (step == 0 && rank == 1) loss = loss + output_scale.sum() * 1e38;
        return loss;
      },
      /*averaged=*/false);
}

// The Accelerator on several ranks: each rank's loader share, gathered for metrics, is the data
// set exactly once and in order (11 examples: the sampler pads with a duplicate that must go);
// a state saved by rank 0 loads on every rank.
void accelerator_ranks(const std::string& out) {
  dist::Accelerator accelerator;
  auto dataset = std::make_shared<data::TensorDataset>(arange(0, 11, 1, {DType::f32}), arange(0, 11, 1, {DType::i64}));
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 3});
  TensorList targets;
  for (const data::Batch& batch : loader) targets.push_back(accelerator.gather_for_metrics(batch.target));
  const Tensor gathered = cat(targets);
  SG_CHECK(gathered.numel() == 11, "gathered ", gathered.numel(), " results");
  for (int64_t i = 0; i < 11; ++i)
    SG_CHECK(gathered.data_ptr<int64_t>()[i] == i, "gathered[", i, "] = ", gathered.data_ptr<int64_t>()[i]);

  auto model = accelerator.prepare(ddp::make_mlp(1));
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  accelerator.prepare(optimizer);
  const std::string path = out + "/state.safetensors";
  accelerator.save_state(path, *model, {{"epoch", "7"}});
  {
    NoGradGuard no_grad;
    for (Tensor p : model->parameters()) p.fill_(accelerator.process_index());
  }
  SG_CHECK(accelerator.load_state(path, *model).at("epoch") == "7", "metadata lost");
  const Tensor first = model->parameters()[0];
  Tensor expected = ddp::make_mlp(1)->parameters()[0];
  SG_CHECK((first - expected).abs().max().item() == 0, "rank ", accelerator.process_index(), " did not load the state");
  std::cout << "rank " << accelerator.process_index() << ": accelerator ok\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: dist_worker_ddp <scenario> <output dir> [arguments]\n";
    return 2;
  }
  const std::string scenario = argv[1], out = argv[2];
  const auto arg = [&](int i, const char* fallback) { return std::string(argc > i ? argv[i] : fallback); };
  try {
    set_num_threads(1);
    dist::init_process_group();
    if (scenario == "equivalence")
      equivalence(out, std::stod(arg(3, "25")), std::stoi(arg(4, "1")), arg(5, ""), arg(6, "none") == "none",
                  arg(7, "plain") == "checkpointed");
    else if (scenario == "two_inputs") two_inputs(out);
    else if (scenario == "unused") unused_parameters(out, arg(3, "1") == "1");
    else if (scenario == "mismatch") mismatched_models();
    else if (scenario == "mismatch_options") mismatched_options();
    else if (scenario == "syncbn") sync_batch_norm(out);
    else if (scenario == "buffers") buffers(out);
    else if (scenario == "rank_dies") rank_dies();
    else if (scenario == "scaler") scaler_agreement(false);
    else if (scenario == "scaler_local") scaler_local_gradient(false);
    else if (scenario == "scaler_diagnostics") scaler_agreement(true);
    else if (scenario == "scaler_local_diagnostics") scaler_local_gradient(true);
    else if (scenario == "accelerator") accelerator_ranks(out);
    else SG_FAIL("unknown scenario '", scenario, "'");
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cerr << "rank " << dist::get_rank() << ": " << e.what() << "\n";
    return 3;
  }
  return 0;
}
