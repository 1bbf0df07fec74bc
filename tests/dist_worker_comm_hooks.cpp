// One rank of the communication-hook tests (tests/test_comm_hooks.cpp starts one process per rank).
// Usage: dist_worker_comm_hooks <scenario> <output dir> [scenario arguments]; an sg::Error ends the
// process with exit code 3 (tests/worker_main.h).
#include <string>
#include <vector>

#include "ddp_scenarios.h"
#include "worker_main.h"

using namespace sg;
namespace ddp = sg::test::ddp;

namespace {

// Checks a DDP after each micro-batch's backward; `synchronised`: the one outside no_sync.
using AfterBackward = std::function<void(const dist::DistributedDataParallel& model, bool synchronised)>;

// The MLP of tests/ddp_scenarios.h trained under DDP with ~1 KB buckets (several of them), two
// micro-batches per step, the first under no_sync, with `hook` registered unless it is empty;
// rank 0 saves the final parameters to params.safetensors.
void train_mlp(const std::string& out, const dist::CommHook& hook, const AfterBackward& after_backward = {}) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::DistributedDataParallel model(ddp::make_mlp(1), {.bucket_cap_mb = 0.001});
  if (hook) model.register_comm_hook(hook);
  const auto [begin, end] = ddp::shard(rank, world, ddp::kGlobalBatch);
  ddp::train(model, begin, end, /*micro_batches=*/2, [&](int part, int parts, const std::function<void()>& step) {
    const bool synchronised = part + 1 == parts;
    if (synchronised) {
      step();
    } else {
      auto no_sync = model.no_sync();
      step();
    }
    if (after_backward) after_backward(model, synchronised);
  });
  if (rank == 0) save_safetensors(out + "/params.safetensors", model.module().state_dict());
}

// A custom hook that records what it is given and averages with allreduce_hook. After each
// backward, the calls since the previous one must be: none under no_sync; one per bucket, in
// bucket order, with that bucket's buffer, parameters and gradient views, otherwise. Prints the
// number of calls in all.
void custom_hook(const std::string& out) {
  const int rank = dist::get_rank();
  std::vector<dist::GradBucket> calls;
  size_t total_calls = 0;
  const dist::CommHook hook = [&](dist::ProcessGroup& group, dist::GradBucket& bucket) {
    calls.push_back(bucket);
    ++total_calls;
    return dist::allreduce_hook(group, bucket);
  };
  train_mlp(out, hook, [&](const dist::DistributedDataParallel& model, bool synchronised) {
    if (!synchronised) {
      SG_CHECK(calls.empty(), "rank ", rank, ": the hook ran ", calls.size(), " time(s) in a no_sync backward");
      return;
    }
    const std::vector<dist::Bucket>& buckets = model.reducer().buckets();
    const TensorList params = model.parameters();
    SG_CHECK(calls.size() == buckets.size(), "rank ", rank, ": the hook ran ", calls.size(), " times for ",
             buckets.size(), " buckets");
    for (size_t b = 0; b < buckets.size(); ++b) {
      const dist::GradBucket& call = calls[b];
      SG_CHECK(call.index() == b && call.is_last() == (b + 1 == buckets.size()), "rank ", rank, ": call ", b,
               " got bucket ", call.index(), ", is_last ", call.is_last());
      SG_CHECK(call.buffer().is_same(buckets[b].buffer), "rank ", rank, ": bucket ", b,
               "'s buffer is not the reducer's");
      SG_CHECK(
          call.parameters().size() == buckets[b].params.size() && call.gradients().size() == buckets[b].params.size(),
          "rank ", rank, ": bucket ", b, " has ", buckets[b].params.size(), " parameters, the hook got ",
          call.parameters().size());
      for (size_t slot = 0; slot < buckets[b].params.size(); ++slot) {
        const Tensor& param = params[buckets[b].params[slot]];
        SG_CHECK(call.parameters()[slot].is_same(param) && call.gradients()[slot].is_same(param.grad()), "rank ", rank,
                 ": bucket ", b, " slot ", slot, ": not the parameter or its gradient view");
      }
    }
    calls.clear();
  });
  std::cout << "rank " << rank << ": " << total_calls << " hook calls\n";
}

// Three parameters whose gradients are slices of the tensor forward is given: the loss
// sum(cat(parameters) * c) has d/dw_i = c's slice i. At a 1 KB bucket cap the 1000-element one
// has a bucket of its own and the two small ones share one.
class Weights : public nn::Module {
public:
  static constexpr int64_t kNumel = 1000 + 37 + 5;
  Weights() {
    for (int64_t numel : {1000, 37, 5})
      weights_.push_back(register_parameter(detail::concat("w", weights_.size()), zeros({numel})));
  }
  Tensor forward(const Tensor& c) override { return (cat(weights_) * c).sum(); }

private:
  TensorList weights_;
};

// One synchronised backward of Weights under DDP with the built-in hook `hook`, registered
// directly (`through` "ddp") or by an Accelerator's comm_hook option ("accelerator"), every rank's
// gradients drawn from its own seed: "random" (normal), or "representable" (multiples of 1/4 in
// [-16, 16), whose average over 2 ranks has 8 significant bits at most: exact in f16 and bf16).
// Each rank saves its own gradients ("local") and the averaged ones ("average") to rank<r>.safetensors.
void average(const std::string& out, const std::string& hook, const std::string& values, const std::string& through) {
  const int rank = dist::get_rank();
  Generator generator(17 + static_cast<uint64_t>(rank));
  SG_CHECK(values == "random" || values == "representable", "unknown values '", values, "'");
  const Tensor local = values == "random"
                           ? randn({Weights::kNumel}, {}, &generator)
                           : randint(-64, 64, {Weights::kNumel}, {DType::i64}, &generator).to(DType::f32) * 0.25;
  auto weights = std::make_shared<Weights>();
  const dist::DDPOptions small_buckets{.bucket_cap_mb = 0.001};
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<dist::Accelerator> accelerator;
  if (through == "accelerator") {
    dist::AcceleratorOptions options;
    options.ddp = small_buckets;
    options.comm_hook = hook;
    options.device = "cpu";
    accelerator = std::make_unique<dist::Accelerator>(options);
    model = accelerator->prepare(weights);
  } else {
    auto ddp_model = std::make_shared<dist::DistributedDataParallel>(weights, small_buckets);
    ddp_model->register_comm_hook(dist::builtin_comm_hook(hook));
    model = ddp_model;
  }
  const auto& buckets = dynamic_cast<const dist::DistributedDataParallel&>(*model).reducer().buckets();
  SG_CHECK(buckets.size() == 2, "expected 2 buckets, got ", buckets.size());
  (*model)(local).backward();
  TensorList averages;
  for (const Tensor& w : weights->parameters()) averages.push_back(w.grad());
  save_safetensors(out + "/rank" + std::to_string(rank) + ".safetensors",
                   {{"local", local}, {"average", cat(averages)}});
}

// A [16, 12] matrix and a [5] vector whose gradients are the slices of the tensor forward is
// given, as in Weights; in one bucket.
class MatrixAndBias : public nn::Module {
public:
  static constexpr int64_t kNumel = 16 * 12 + 5;
  MatrixAndBias() {
    matrix = register_parameter("matrix", zeros({16, 12}));
    bias = register_parameter("bias", zeros({5}));
  }
  Tensor forward(const Tensor& c) override { return (cat({matrix.reshape({-1}), bias}) * c).sum(); }
  Tensor matrix, bias;
};

// PowerSGD of rank 1 from the second synchronised backward on, with error feedback or without
// (`error_feedback` "1" / "0"). Step 1: random gradients (averaged exactly, before compression
// starts). Step 2: rank-1 matrices u v_r^T with u the same on every rank (so their average is
// rank 1 and PowerSGD's approximation is exact) and random biases. Steps 3 to 42: the same random
// G (and bias) on every rank, so each average is G. Rank 0 saves each rank's gradients of steps
// 1 and 2 ("local1_r<r>", "local2_r<r>"), the averages of steps 1 and 2, G and the sum of the
// averages of steps 3 to 42 ("sum").
void powersgd(const std::string& out, const std::string& error_feedback) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  auto weights = std::make_shared<MatrixAndBias>();
  dist::DistributedDataParallel model(weights);
  model.register_comm_hook(dist::powerSGD_hook(
      {.matrix_approximation_rank = 1, .start_powerSGD_iter = 1, .use_error_feedback = error_feedback == "1"}));
  const auto averages_after = [&](const Tensor& local) {
    model.zero_grad();
    model(local).backward();
    return cat({weights->matrix.grad().reshape({-1}), weights->bias.grad()}).clone();
  };
  const auto random_gradients = [](uint64_t seed) {
    Generator generator(seed);
    return randn({MatrixAndBias::kNumel}, {}, &generator);
  };
  const auto rank_one_gradients = [&](int r) {
    Generator shared(5), own(50 + static_cast<uint64_t>(r));
    const Tensor u = randn({16, 1}, {}, &shared), v = randn({1, 12}, {}, &own);
    return cat({mm(u, v).reshape({-1}), randn({5}, {}, &own)});
  };
  nn::StateDict saved;
  for (int r = 0; r < world; ++r) {
    saved["local1_r" + std::to_string(r)] = random_gradients(10 + static_cast<uint64_t>(r));
    saved["local2_r" + std::to_string(r)] = rank_one_gradients(r);
  }
  saved["average1"] = averages_after(saved.at("local1_r" + std::to_string(rank)));
  saved["average2"] = averages_after(saved.at("local2_r" + std::to_string(rank)));
  saved["G"] = random_gradients(99);
  Tensor sum = zeros({MatrixAndBias::kNumel});
  for (int step = 3; step <= 42; ++step) sum.add_(averages_after(saved.at("G")));
  saved["sum"] = sum;
  if (rank == 0) save_safetensors(out + "/powersgd.safetensors", saved);
}

}  // namespace

int main(int argc, char** argv) {
  return test::run_worker(argc, argv, [](const std::string& scenario, const std::string& out, const auto& argument) {
    dist::init_process_group();
    if (scenario == "train") train_mlp(out, dist::builtin_comm_hook(argument(3)));
    else if (scenario == "custom") custom_hook(out);
    else if (scenario == "average") average(out, argument(3), argument(4), argument(5));
    else if (scenario == "powersgd") powersgd(out, argument(3));
    else SG_FAIL("unknown scenario '", scenario, "'");
    dist::destroy_process_group();
  });
}
