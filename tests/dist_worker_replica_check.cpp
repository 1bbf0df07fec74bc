// One rank of the replica-check tests (tests/test_replica_check.cpp starts one process per rank).
// Usage: dist_worker_replica_check <scenario> <output dir>
// Each scenario but "clean" plants a bug that lets the replicas drift apart; DDP's replica check
// must stop every rank with an sg::Error, which run_worker prints to stderr with exit code 3.
#include <functional>
#include <iostream>
#include <string>

#include "ddp_scenarios.h"
#include "worker_main.h"

using namespace sg;
namespace ddp = sg::test::ddp;

namespace {

// `steps` optimizer steps of `model` on this rank's rows of each global batch, the loss the mean
// square of the output. Each step accumulates `micro_batches` parts, all but the last under
// no_sync; `after_local_part(step)` runs after each of those (where a bug can step too early).
void train(
    dist::DistributedDataParallel& model, optim::Optimizer& optimizer, int steps, int micro_batches = 1,
    const std::function<void(int step)>& after_local_part = [](int) {}) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  const int64_t part_rows = (end - begin) / micro_batches;
  for (int step = 0; step < steps; ++step) {
    const Tensor x = ddp::batch(step).first;
    optimizer.zero_grad();
    for (int part = 0; part < micro_batches; ++part) {
      const auto forward_backward = [&] {
        (model(x.narrow(0, begin + part * part_rows, part_rows)).pow(2.0).mean() / double(micro_batches)).backward();
      };
      if (part + 1 == micro_batches) {
        forward_backward();
      } else {
        auto no_sync = model.no_sync();
        forward_backward();
        after_local_part(step);
      }
    }
    optimizer.step();
  }
}

// No bug: BatchNorm buffers broadcast, Adam, two micro-batches per step, a check after every
// step and one at the end with the optimizer's state.
void clean() {
  dist::DistributedDataParallel model(ddp::make_linear_batch_norm(), {.check_replicas_every = 1});
  optim::Adam optimizer(model.parameters(), {.lr = 0.01});
  train(model, optimizer, 4, 2);
  model.check_replicas(optimizer.named_state(model.named_parameters()));
  std::cout << "rank " << dist::get_rank() << ": the replicas agree after step "
            << model.reducer().synchronised_backwards() << "\n";
}

// Bug: rank 1 unfreezes the last bias after DDP was built, so DDP never averages its gradient:
// rank 1's optimizer steps that bias on its own rows' gradient.
void unaveraged_gradient() {
  auto mlp = ddp::make_mlp(1);
  Tensor last_bias = mlp->parameters().back();
  last_bias.requires_grad_(false);
  dist::DistributedDataParallel model(mlp, {.check_replicas_every = 1});
  if (dist::get_rank() == 1) last_bias.requires_grad_(true);
  optim::SGD optimizer(model.parameters(), {.lr = 0.05});
  train(model, optimizer, 3);
}

// Bug: BatchNorm statistics stay per rank (broadcast_buffers = false), each from its own rows.
void local_buffers() {
  dist::DistributedDataParallel model(ddp::make_linear_batch_norm(),
                                      {.broadcast_buffers = false, .check_replicas_every = 1});
  optim::SGD optimizer(model.parameters(), {.lr = 0.05});
  train(model, optimizer, 3);
}

// Bug: in the third step rank 1 steps right after the no_sync micro-batch, on gradients no rank
// averaged, and then again after the synchronised one. Checked every 2 steps: the check after
// step 2 passes, the one after step 4 fails.
void no_sync_step() {
  dist::DistributedDataParallel model(ddp::make_mlp(1), {.check_replicas_every = 2});
  optim::SGD optimizer(model.parameters(), {.lr = 0.05, .momentum = 0.9});
  train(model, optimizer, 5, 2, [&](int step) {
    if (step == 2 && dist::get_rank() == 1) optimizer.step();
  });
}

// Bug: rank 1's Adam state drifts (as if it had resumed from another snapshot); the weights
// agree. The Accelerator's save_state checks before writing and must refuse on every rank.
void snapshot(const std::string& out) {
  dist::AcceleratorOptions options;
  options.ddp.check_replicas_every = 100;
  dist::Accelerator accelerator(options);
  auto model = accelerator.prepare(ddp::make_mlp(1));
  optim::Adam optimizer(model->parameters(), {.lr = 0.01});
  accelerator.prepare(optimizer);
  auto& ddp_model = dynamic_cast<dist::DistributedDataParallel&>(*model);
  train(ddp_model, optimizer, 2);
  if (accelerator.process_index() == 1) {
    NoGradGuard no_grad;
    Tensor exp_avg = optimizer.state(model->parameters()[2])->exp_avg;
    exp_avg.add_(1e-3);
  }
  accelerator.save_state(out + "/state.safetensors", *model);
}

void run(const std::string& scenario, const std::string& out, const test::WorkerArgument&) {
  if (scenario == "snapshot") return snapshot(out);  // the Accelerator joins the group itself
  dist::init_process_group();
  if (scenario == "clean") clean();
  else if (scenario == "unaveraged_gradient") unaveraged_gradient();
  else if (scenario == "local_buffers") local_buffers();
  else if (scenario == "no_sync_step") no_sync_step();
  else SG_FAIL("unknown scenario '", scenario, "'");
  dist::destroy_process_group();
}

}  // namespace

int main(int argc, char** argv) { return test::run_worker(argc, argv, run); }
