// One rank of tests/test_zero_redundancy_optimizer.cpp. Usage: dist_worker_zero <scenario> [file]
//   adamw, sgd        ZeRO-1 beside plain DDP for 20 steps (clipped, on a StepLR schedule): the same
//                     parameters, each rank holding only its shard of the state; then the state
//                     dicts both ways (ZeRO -> plain on rank 0, plain -> ZeRO and 5 more steps)
//   partition         the owners of parameters of 10, 40, 30, 20 and 5 elements
//   different_models  rank 1's parameters differ: every rank refuses
//   accelerator FILE  Accelerator::save_state of a ZeRO optimizer into FILE, loaded back by
//                     load_state and, on rank 0, into a plain AdamW by optim::load_checkpoint
//   stage2 OPTIMIZER BUCKET_MB MICRO_BATCHES
//                     ZeRO-2's gradients (reduce_scatter_gradients_hook) beside plain DDP for 20
//                     clipped steps on a StepLR schedule, each accumulating MICRO_BATCHES under
//                     no_sync: after every backward the owned gradients are plain DDP's average,
//                     the others are not taken for one, the clip's global norm is plain's; at the
//                     end the parameters are plain's. Prints how the buckets travelled, and the
//                     bytes per step both runs' gradients sent through Gloo's TCP (none through
//                     shared memory: run with SG_SHM_ALLREDUCE=0 to count them).
//   stage2_accelerator  the Accelerator with zero_shard_gradients: its clip, its found-inf
//                     agreement, and its refusals (a plain optimizer; an optimizer before the model);
//                     optim::clip_grad_norm_ and a GradScaler deciding alone refuse the gradients
//   stage2_found_inf  3 ranks, f16 under the Accelerator with zero_shard_gradients: an inf in
//                     rank 1's gradient of a parameter rank 0 owns; every rank skips that step
// Exit codes: 0 all checks passed, 1 a result was wrong (printed), 3 an sg::Error (printed).
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "collective_expectations.h"  // defines: expect, failures
#include "ddp_scenarios.h"
#include "dist/process_group_gloo.h"  // defines: ProcessGroupGloo::all_reduce_bytes_through_gloo
#include "syncgrad.h"

using namespace sg;
using test::collectives::expect;
using test::collectives::failures;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(const TensorList&)>;

MakeOptimizer optimizer_for(const std::string& scenario) {
  if (scenario == "sgd")
    return [](const TensorList& params) {
      return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    };
  return [](const TensorList& params) {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
  };
}

// forward + backward of `model` on this rank's rows of global batch `step`.
void backward_on_batch(nn::Module& model, int step) {
  const auto [x, y] = test::ddp::batch(step);
  const auto [begin, end] = test::ddp::shard(dist::get_rank(), dist::get_world_size(), test::ddp::kGlobalBatch);
  nn::functional::mse_loss(model(x.narrow(0, begin, end - begin)), y.narrow(0, begin, end - begin)).backward();
}

// One training step as the apps take it: clipped to a global norm small enough to clip.
void train_step(nn::Module& model, optim::Optimizer& optimizer, optim::LRScheduler& scheduler, int step) {
  optimizer.zero_grad();
  backward_on_batch(model, step);
  optim::clip_grad_norm_(model.parameters(), 0.5);
  optimizer.step();
  scheduler.step();
}

double largest_difference(const TensorList& a, const TensorList& b) {
  double largest = 0;
  for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, (a[i] - b[i]).abs().max().item());
  return largest;
}

int64_t state_bytes(const optim::OptimizerState& state) {
  int64_t bytes = 0;
  for (const auto& [key, tensor] : state.tensors) bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  return bytes;
}

// Every key of `expected` in `got` with the same values (f32 state: equal within 1e-6), and no other.
void expect_same_state(const optim::OptimizerState& got, const optim::OptimizerState& expected,
                       const std::string& what) {
  expect(
      got.type == expected.type && got.param_groups == expected.param_groups && got.group_sizes == expected.group_sizes,
      what + ": type and param groups");
  expect(got.tensors.size() == expected.tensors.size(), what + ": " + std::to_string(got.tensors.size()) +
                                                            " state tensors, expected " +
                                                            std::to_string(expected.tensors.size()));
  for (const auto& [key, tensor] : expected.tensors) {
    const auto it = got.tensors.find(key);
    expect(it != got.tensors.end() && (it->second.to(DType::f64) - tensor.to(DType::f64)).abs().max().item() <= 1e-6,
           what + ": " + key);
  }
}

void zero_beside_plain_ddp(const std::string& scenario) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const MakeOptimizer make = optimizer_for(scenario);
  auto plain_model = std::make_shared<dist::DistributedDataParallel>(test::ddp::make_mlp(7));
  auto zero_model = std::make_shared<dist::DistributedDataParallel>(test::ddp::make_mlp(7));
  const auto plain = make(plain_model->parameters());
  dist::ZeroRedundancyOptimizer zero(make(zero_model->parameters()));
  optim::StepLR plain_schedule(*plain, 5, 0.5), zero_schedule(zero, 5, 0.5);
  for (int step = 0; step < 20; ++step) {
    train_step(*plain_model, *plain, plain_schedule, step);
    train_step(*zero_model, zero, zero_schedule, step);
  }
  // The same arithmetic on the same gradients, the result copied bit for bit: 1e-6 is room only.
  const double difference = largest_difference(zero_model->parameters(), plain_model->parameters());
  expect(difference <= 1e-6, "parameters after 20 steps differ from plain DDP's by " + std::to_string(difference));
  expect(zero.lr(0) == plain->lr(0), "the schedule's lr reached the wrapped optimizer");

  // Each rank holds exactly its shard's state, and the shards add up to the plain optimizer's.
  const TensorList params = zero.all_params();
  int64_t total = 0, largest = 0, owned = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    total += params[i].numel();
    largest = std::max(largest, params[i].numel());
    owned += zero.owner(i) == rank ? 1 : 0;
  }
  expect(zero.total_numel() == total, "the shards cover every parameter element once");
  expect(zero.shard_numel(rank) <= total / world + largest, "a shard at most 1/N plus one parameter");
  const int64_t per_element = scenario == "sgd" ? 4 : 8;    // momentum, or Adam's two moments, in f32
  const int64_t per_parameter = scenario == "sgd" ? 0 : 8;  // Adam's step count, an i64
  expect(zero.local_state_bytes() == zero.shard_numel(rank) * per_element + owned * per_parameter,
         "this rank's state is its shard's: " + std::to_string(zero.local_state_bytes()) + " bytes");
  Tensor all_ranks = full({1}, static_cast<double>(zero.local_state_bytes()), {DType::i64});
  dist::all_reduce(all_ranks);
  expect(all_ranks.item<int64_t>() == state_bytes(plain->state_dict()), "the shards add up to the plain state");
  expect(zero.local_state_bytes() < state_bytes(plain->state_dict()), "less state than the plain optimizer");

  // ZeRO -> plain: the consolidated state on rank 0 equals plain DDP's and loads into a plain one.
  zero.consolidate_state_dict(0);
  if (rank == 0) {
    const optim::OptimizerState whole = zero.state_dict();
    expect_same_state(whole, plain->state_dict(), "consolidated state");
    const auto fresh = make(test::ddp::make_mlp(7)->parameters());
    fresh->load_state_dict(whole);
    expect_same_state(fresh->state_dict(), plain->state_dict(), "a plain optimizer loaded from it");
  } else {
    bool refused = false;
    try {
      zero.state_dict();
    } catch (const Error&) {
      refused = true;
    }
    expect(refused, "state_dict() on a rank that did not receive the consolidated state throws");
  }

  // plain -> ZeRO: a fresh ZeRO optimizer loads plain DDP's state, keeps its shard, and goes on alike.
  auto resumed_model = std::make_shared<dist::DistributedDataParallel>(test::ddp::make_mlp(7));
  resumed_model->module().load_state_dict(plain_model->module().state_dict());
  dist::ZeroRedundancyOptimizer resumed(make(resumed_model->parameters()));
  resumed.load_state_dict(plain->state_dict());
  expect(resumed.local_state_bytes() == zero.local_state_bytes(), "a loaded state keeps this rank's shard only");
  optim::StepLR resumed_schedule(resumed, 5, 0.5);
  resumed_schedule.load_state_dict(plain_schedule.state_dict());
  for (int step = 20; step < 25; ++step) {
    train_step(*plain_model, *plain, plain_schedule, step);
    train_step(*resumed_model, resumed, resumed_schedule, step);
  }
  const double after_resume = largest_difference(resumed_model->parameters(), plain_model->parameters());
  expect(after_resume <= 1e-6,
         "5 steps after loading plain DDP's state, parameters differ by " + std::to_string(after_resume));
}

// forward + backward of step `step` in `micro_batches` parts, all but the last under no_sync: part
// k trains on global batch step * micro_batches + k, its loss divided by micro_batches.
void accumulate_backward(dist::DistributedDataParallel& model, int step, int micro_batches) {
  for (int part = 0; part < micro_batches; ++part) {
    const auto [x, y] = test::ddp::batch(step * micro_batches + part);
    const auto [begin, end] = test::ddp::shard(dist::get_rank(), dist::get_world_size(), test::ddp::kGlobalBatch);
    const auto forward_backward = [&, x = x, y = y, begin = begin, end = end] {
      (nn::functional::mse_loss(model(x.narrow(0, begin, end - begin)), y.narrow(0, begin, end - begin)) /
       static_cast<double>(micro_batches))
          .backward();
    };
    if (part + 1 < micro_batches) {
      const auto no_sync = model.no_sync();
      forward_backward();
    } else {
      forward_backward();
    }
  }
}

void stage2_beside_plain_ddp(const std::string& optimizer, double bucket_cap_mb, int micro_batches) {
  const int rank = dist::get_rank();
  const MakeOptimizer make = optimizer_for(optimizer);
  const dist::DDPOptions options{.bucket_cap_mb = bucket_cap_mb};
  auto plain_model = std::make_shared<dist::DistributedDataParallel>(test::ddp::make_mlp(7), options);
  auto zero_model = std::make_shared<dist::DistributedDataParallel>(test::ddp::make_mlp(7), options);
  const auto plain = make(plain_model->parameters());
  dist::ZeroRedundancyOptimizer zero(make(zero_model->parameters()));
  zero_model->register_comm_hook(zero.reduce_scatter_gradients_hook());
  optim::StepLR plain_schedule(*plain, 5, 0.5), zero_schedule(zero, 5, 0.5);
  const TensorList plain_params = plain_model->parameters(), zero_params = zero_model->parameters();
  const auto& gloo = dynamic_cast<const dist::ProcessGroupGloo&>(dist::default_group());
  uint64_t plain_bytes = 0, zero_bytes = 0;  // of the gradients' collectives, through Gloo's TCP
  for (int step = 0; step < 20; ++step) {
    plain->zero_grad();
    zero.zero_grad();
    const uint64_t before_plain = gloo.all_reduce_bytes_through_gloo();
    accumulate_backward(*plain_model, step, micro_batches);
    const uint64_t before_zero = gloo.all_reduce_bytes_through_gloo();
    accumulate_backward(*zero_model, step, micro_batches);
    plain_bytes += before_zero - before_plain;
    zero_bytes += gloo.all_reduce_bytes_through_gloo() - before_zero;
    // The layouts tested reduce-scatter either every bucket or none, so a gradient holds the
    // average exactly when it is owned or every bucket was all-reduced.
    const bool all_reduced = zero.buckets_reduce_scattered() == 0;
    for (size_t i = 0; i < zero_params.size(); ++i) {
      const bool owned = zero.owner(i) == rank;
      const std::string name = "step " + std::to_string(step) + ", parameter " + std::to_string(i);
      expect(zero_model->reducer().holds_average(zero_params[i].grad()) == (owned || all_reduced),
             name + ": holds_average is true exactly for the gradients averaged here");
      if (!owned) continue;
      const double difference = (zero_params[i].grad() - plain_params[i].grad()).abs().max().item();
      expect(difference <= 1e-6,
             name + ": the owned gradient differs from plain DDP's average by " + std::to_string(difference));
    }
    const double plain_norm = optim::clip_grad_norm_(plain_params, 0.5);
    const double zero_norm = zero.clip_grad_norm_(zero_params, 0.5);
    expect(std::abs(zero_norm - plain_norm) <= 1e-6 * plain_norm,
           "step " + std::to_string(step) + ": the clip's global norm " + std::to_string(zero_norm) +
               " differs from plain DDP's " + std::to_string(plain_norm));
    plain->step();
    zero.step();
    plain_schedule.step();
    zero_schedule.step();
  }
  // f32 arithmetic on the same averages (summed in another order only by the clip's norm).
  const double difference = largest_difference(zero_params, plain_params);
  expect(difference <= 1e-6, "parameters after 20 steps differ from plain DDP's by " + std::to_string(difference));
  std::cout << "buckets reduce-scattered " << zero.buckets_reduce_scattered() << ", all-reduced "
            << zero.buckets_all_reduced() << "\n";
  std::cout << "gradient bytes through gloo per step: plain " << plain_bytes / 20 << ", zero-2 " << zero_bytes / 20
            << "\n";
}

// Whether `run` throws an sg::Error whose message contains `message`.
bool refuses(const std::function<void()>& run, const std::string& message) {
  try {
    run();
  } catch (const Error& error) {
    const bool matches = std::string(error.what()).find(message) != std::string::npos;
    if (!matches) std::cout << "unexpected error: " << error.what() << "\n";
    return matches;
  }
  return false;
}

void stage2_accelerator() {
  dist::AcceleratorOptions options;
  options.zero_shard_gradients = true;
  dist::Accelerator accelerator(options);
  auto early = std::make_unique<optim::AdamW>(test::ddp::make_mlp(7)->parameters());
  dist::ZeroRedundancyOptimizer before_model(std::move(early));
  expect(refuses([&] { accelerator.prepare(before_model); }, "none was prepared yet; prepare(model) before"),
         "prepare(optimizer) before prepare(model) is refused");
  auto model = accelerator.prepare(test::ddp::make_mlp(7));
  optim::AdamW plain(model->parameters());
  expect(refuses([&] { accelerator.prepare(plain); }, "but the prepared optimizer is a plain AdamW"),
         "a plain optimizer is refused");
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::AdamW>(model->parameters()));
  accelerator.prepare(zero);
  expect(zero.shards_gradients(), "prepare(optimizer) registered the ZeRO-2 hook");
  const TensorList params = model->parameters();
  for (int step = 0; step < 3; ++step) {
    accelerator.zero_grad(zero);
    backward_on_batch(*model, step);
    // Some gradients are this rank's own sums, so the scaler's found_inf must be all-reduced.
    TensorList grads;
    for (const Tensor& p : params) grads.push_back(p.grad());
    expect(!accelerator.gradients_averaged_by_ddp(grads),
           "the accelerator does not take every gradient for an average");
    // Each rank holds some parameters it does not own; what would read their local sums as the
    // whole gradient refuses, before it changes any gradient.
    expect(refuses([&] { optim::clip_grad_norm_(params, 0.5); }, "Clip with ZeroRedundancyOptimizer::clip_grad_norm_"),
           "optim::clip_grad_norm_ refuses gradients left unaveraged");
    amp::GradScaler deciding_alone;
    expect(refuses([&] { deciding_alone.unscale_(zero); }, "GradScalerOptions::agree_across_ranks"),
           "a GradScaler with no agreement across ranks refuses them");
    const double norm = accelerator.clip_grad_norm_(params, 0.5);
    Tensor every_rank = full({1}, norm, {DType::f64});
    dist::all_reduce(every_rank, dist::ReduceOp::MAX);
    expect(every_rank.item() == norm, "every rank's clip returns the same global norm");
    accelerator.step(zero);
  }
  expect(zero.buckets_reduce_scattered() == 3, "each of the 3 backwards reduce-scattered the model's one bucket");
}

// The inf reaches rank 0's average and stays in rank 1's own slice, but rank 2 holds neither:
// only the Accelerator's all-reduce of found_inf makes rank 2 skip the step too (without it,
// rank 2 would step alone and wait in the parameters' all-gather for the others).
void stage2_found_inf() {
  const int rank = dist::get_rank();
  dist::AcceleratorOptions options;
  options.zero_shard_gradients = true;
  options.mixed_precision = "f16";
  dist::Accelerator accelerator(options);
  auto model = accelerator.prepare(test::ddp::make_mlp(7));
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::AdamW>(model->parameters()));
  accelerator.prepare(zero);
  const Tensor owned_by_rank_0 = model->parameters()[2];  // the 32x32 weight, the largest
  expect(zero.owner(2) == 0 && dist::get_world_size() == 3, "3 ranks, parameter 2 owned by rank 0");
  const auto [begin, end] = test::ddp::shard(rank, 3, test::ddp::kGlobalBatch);
  for (int step = 0; step < 4; ++step) {
    accelerator.zero_grad(zero);
    const auto [x, y] = test::ddp::batch(step);
    Tensor loss;
    {
      const amp::AutocastGuard autocast = accelerator.autocast();
      loss = nn::functional::mse_loss((*model)(x.narrow(0, begin, end - begin)), y.narrow(0, begin, end - begin));
    }
    // d/dw of sum(w * inf) is inf: this gradient, on rank 1 only.
    if (step == 2 && rank == 1) loss = loss + (owned_by_rank_0 * std::numeric_limits<double>::infinity()).sum();
    accelerator.backward(loss);
    const bool stepped = accelerator.step(zero);
    expect(stepped == (step != 2), "step " + std::to_string(step) + (stepped ? " was taken" : " was skipped"));
  }
}

void partition() {
  TensorList params;
  for (int64_t numel : {10, 40, 30, 20, 5}) params.push_back(randn({numel}).requires_grad_());
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::SGD>(params));
  std::string owners;
  for (size_t i = 0; i < params.size(); ++i) owners += std::to_string(zero.owner(i));
  std::cout << "owners " << owners << "\n";
}

void different_models() {
  auto model = test::ddp::make_mlp(7);
  if (dist::get_rank() == 1) model = test::ddp::make_linear_batch_norm();
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::AdamW>(model->parameters()));
}

void accelerator_snapshot(const std::string& path) {
  dist::Accelerator accelerator;
  auto model = accelerator.prepare(test::ddp::make_mlp(7));
  dist::ZeroRedundancyOptimizer zero(std::make_unique<optim::AdamW>(model->parameters()));
  accelerator.prepare(zero);
  for (int step = 0; step < 3; ++step) {
    zero.zero_grad();
    backward_on_batch(*model, step);
    accelerator.step(zero);
  }
  const int64_t shard_bytes = zero.local_state_bytes();
  accelerator.save_state(path, *model);
  accelerator.load_state(path, *model);
  expect(zero.local_state_bytes() == shard_bytes, "load_state restores this rank's shard");
  zero.consolidate_state_dict(0);
  if (dist::get_rank() == 0) {
    auto plain_model = test::ddp::make_mlp(1);
    optim::AdamW plain(plain_model->parameters());
    optim::load_checkpoint(path, *plain_model, &plain);
    expect_same_state(plain.state_dict(), zero.state_dict(), "the snapshot loaded into a plain AdamW");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    dist::init_process_group();
    if (scenario == "adamw" || scenario == "sgd") zero_beside_plain_ddp(scenario);
    else if (scenario == "partition") partition();
    else if (scenario == "different_models") different_models();
    else if (scenario == "accelerator" && argc > 2) accelerator_snapshot(argv[2]);
    else if (scenario == "stage2" && argc > 4) stage2_beside_plain_ddp(argv[2], std::stod(argv[3]), std::stoi(argv[4]));
    else if (scenario == "stage2_accelerator") stage2_accelerator();
    else if (scenario == "stage2_found_inf") stage2_found_inf();
    else {
      std::cout << "unknown scenario " << scenario << "\n";
      return 2;
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cout << "rank " << dist::get_rank() << ": " << e.what() << "\n";
    return 3;
  }
  return failures == 0 ? 0 : 1;
}
