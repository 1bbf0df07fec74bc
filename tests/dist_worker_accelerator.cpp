// One rank of the multi-process Accelerator tests (tests/test_accelerator.cpp starts one process
// per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set). Usage:
//   dist_worker_accelerator <scenario> <output dir> [scenario arguments]
// Each rank checks what it can itself (an sg::Error is printed to stderr naming the rank and
// ends the process with exit code 3) and writes what the test compares across runs into
// <output dir>.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "dist/environment.h"
#include "syncgrad.h"
#include "train/virtual_ranks.h"
#include "worker_main.h"

using namespace sg;

namespace {

// x: [size, 4] from a fixed generator; y = a smooth function of x plus noise, [size, 1]. Every
// rank and every run builds the same data set.
std::shared_ptr<data::TensorDataset> regression_data(int64_t size) {
  Generator generator(7);
  const Tensor x = randn({size, 4}, {}, &generator);
  const Tensor y = x.narrow(1, 0, 1) * 0.5 - x.narrow(1, 1, 1).tanh() + randn({size, 1}, {}, &generator) * 0.1;
  return std::make_shared<data::TensorDataset>(x, y);
}

std::shared_ptr<nn::Sequential> small_mlp() {
  Generator generator(11);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(8, 1, true, &generator)});
}

std::string rank_name() { return "rank " + std::to_string(dist::get_rank()); }

// The indices of the data set in the order the sampler lists them in `epoch` (Note
// [DistributedSampler padding]: the same list on every rank, before it is dealt out).
std::vector<int64_t> list_order(int64_t size, uint64_t seed, int64_t epoch) {
  return data::DistributedSampler(size, 1, 0, true, seed).indices(epoch);
}

// gather_for_metrics batch by batch, on ranks whose shares are padded: the batches' results
// together are the data set, in the sampler's order, for one tensor, several, and 0-dim values.
void metrics(int64_t size, bool even_batches) {
  dist::AcceleratorOptions options;
  options.even_batches = even_batches;
  dist::Accelerator accelerator(options);
  const int world = accelerator.num_processes();
  auto dataset = std::make_shared<data::TensorDataset>(arange(0, static_cast<double>(size), 1, {DType::f32}) * 0.5,
                                                       arange(0, static_cast<double>(size), 1, {DType::i64}));
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 2, .shuffle = true, .seed = 5});
  for (int epoch = 0; epoch < 2; ++epoch) {  // epoch 1 is shuffled differently: the tracking follows
    TensorList targets, inputs;
    double batch_sums = 0;
    int64_t batch = 0;
    for (const data::Batch& b : loader) {
      const TensorList gathered = accelerator.gather_for_metrics({b.target, b.input});
      targets.push_back(gathered[0]);
      inputs.push_back(gathered[1]);
      // One value per rank whose batch holds an example of the data set.
      const Tensor sums = accelerator.gather_for_metrics(b.target.sum());
      const int64_t ranks_with_examples = std::clamp<int64_t>(size - 2 * batch * world, 0, world);
      SG_CHECK(sums.numel() == ranks_with_examples, rank_name(), ", epoch ", epoch, ", batch ", batch, ": ",
               sums.numel(), " batch sums kept, expected ", ranks_with_examples);
      batch_sums += sums.sum().item();
      ++batch;
    }
    const Tensor all = cat(targets);
    const std::vector<int64_t> expected = list_order(size, 5, epoch);
    SG_CHECK(all.numel() == size, rank_name(), ", epoch ", epoch, ": gathered ", all.numel(), " results, expected ",
             size);
    for (int64_t i = 0; i < size; ++i)
      SG_CHECK(all.data_ptr<int64_t>()[i] == expected[i], rank_name(), ", epoch ", epoch, ": gathered[", i,
               "] = ", all.data_ptr<int64_t>()[i], ", expected ", expected[i]);
    SG_CHECK((cat(inputs) - all.to(DType::f32) * 0.5).abs().max().item() == 0, rank_name(), ": inputs out of step");
    // Uneven batches hold no duplicates, so the per-batch sums add up to 0 + 1 + ... + size - 1.
    if (!even_batches)
      SG_CHECK(batch_sums == static_cast<double>(size * (size - 1) / 2), rank_name(), ": batch sums add up to ",
               batch_sums);
  }

  // Outside a loop: plain collectives.
  const auto rank = static_cast<double>(accelerator.process_index());
  const Tensor ranks = accelerator.gather(full({}, rank, {DType::f32}));
  SG_CHECK(ranks.numel() == world && ranks.data_ptr<float>()[world - 1] == static_cast<float>(world - 1), rank_name(),
           ": gather of 0-dim values");
  const Tensor rows = full({accelerator.process_index() + 1, 2}, rank + 1, {DType::f32});
  const Tensor padded = accelerator.pad_across_processes(rows, 0, -1.0);
  SG_CHECK((padded.sizes() == Shape{world, 2}), rank_name(), ": padded to ", shape_str(padded.sizes()));
  const Tensor all_rows = accelerator.gather(padded);  // world x world rows: rank r's r + 1 rows, then -1s
  SG_CHECK(all_rows.sum().item() ==
               static_cast<double>(world * (world + 1) * (2 * world + 1) / 3 - 2 * world * (world - 1) / 2),
           rank_name(), ": gathered padded rows sum to ", all_rows.sum().item());
  SG_CHECK(accelerator.reduce(full({3}, rank + 1)).sum().item() == 3.0 * world * (world + 1) / 2, rank_name(),
           ": reduce sum");
  SG_CHECK(accelerator.reduce(full({3}, rank + 1), "mean").sum().item() == 3.0 * (world + 1) / 2, rank_name(),
           ": reduce mean");
  std::cout << rank_name() << ": metrics ok\n";
}

// Trains small_mlp on regression_data(size) for `epochs` epochs: batch `batch_size` per rank,
// `steps` micro-batches per optimizer step, SGD with momentum and a StepLR that halves the rate
// every optimizer step. Rank 0 saves the parameters to <out>/<tag>.safetensors; every rank
// prints how many optimizer steps it took.
void train(const std::string& out, const std::string& tag, int64_t size, int64_t batch_size, int steps,
           bool even_batches, int epochs) {
  dist::AcceleratorOptions options;
  options.gradient_accumulation_steps = steps;
  options.even_batches = even_batches;
  dist::Accelerator accelerator(options);
  auto model = accelerator.prepare(small_mlp());
  optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::StepLR step_lr(sgd, 1, 0.5);
  accelerator.prepare(sgd);
  accelerator.prepare(step_lr);
  data::DataLoader loader =
      accelerator.prepare(regression_data(size), {.batch_size = batch_size, .shuffle = true, .seed = 3});
  int64_t optimizer_steps = 0, examples_seen = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (const data::Batch& batch : loader) {
      const auto accumulation = accelerator.accumulate(*model);
      const Tensor prediction = (*model)(batch.input);
      accelerator.backward(nn::functional::mse_loss(prediction, batch.target));
      if (accelerator.sync_gradients()) accelerator.clip_grad_norm_(model->parameters(), 100.0);
      optimizer_steps += accelerator.step(sgd) ? 1 : 0;
      accelerator.step(step_lr);
      accelerator.zero_grad(sgd);
      NoGradGuard no_grad;
      examples_seen += accelerator.gather_for_metrics(prediction.detach()).size(0);
    }
  }
  SG_CHECK(examples_seen == size * epochs, rank_name(), ": the metrics saw ", examples_seen, " examples, expected ",
           size * epochs);
  if (accelerator.is_main_process())
    save_safetensors(out + "/" + tag + ".safetensors", accelerator.unwrap_model(*model).state_dict());
  std::cout << rank_name() << ": " << optimizer_steps << " optimizer steps\n";
}

// Mid-epoch resume, with batches of `batch_size` per rank. "full" trains 2 epochs; "stop" trains
// up to batch `stop_after` of epoch 0 and saves the state inside the loop; any other mode loads
// that state and trains on. Each rank writes the targets of every batch it trained on (one line
// per batch) and rank 0 the final parameters.
void resume(const std::string& out, const std::string& mode, int64_t stop_after, int64_t batch_size) {
  dist::Accelerator accelerator;
  auto model = accelerator.prepare(small_mlp());
  optim::Adam adam(model->parameters(), {.lr = 0.01});
  accelerator.prepare(adam);
  data::DataLoader loader = accelerator.prepare(
      regression_data(50), {.batch_size = batch_size, .shuffle = true, .num_workers = 2, .seed = 9});
  const std::string snapshot = out + "/snapshot.safetensors";
  int start_epoch = 0;
  if (mode != "full" && mode != "stop")
    start_epoch =
        static_cast<int>(optim::metadata_integer(accelerator.load_state(snapshot, *model), "epoch", snapshot, 0, 2));
  std::ofstream seen(out + "/" + mode + "_rank" + std::to_string(accelerator.process_index()) + ".txt");
  for (int epoch = start_epoch; epoch < 2; ++epoch) {
    loader.set_epoch(epoch);
    int64_t batch_index = 0;
    for (const data::Batch& batch : loader) {
      const Tensor targets = batch.target.reshape({-1}).contiguous();
      for (int64_t i = 0; i < targets.numel(); ++i) seen << targets.data_ptr<float>()[i] << ' ';
      seen << '\n';
      adam.zero_grad();
      accelerator.backward(nn::functional::mse_loss((*model)(batch.input), batch.target));
      accelerator.step(adam);
      if (mode == "stop" && batch_index == stop_after) {
        accelerator.save_state(snapshot, *model, {{"epoch", std::to_string(epoch)}});
        return;
      }
      ++batch_index;
    }
  }
  if (accelerator.is_main_process())
    save_safetensors(out + "/" + mode + ".safetensors", accelerator.unwrap_model(*model).state_dict());
}

// Resuming on another number of processes, counted by example: a data set of `size` examples
// whose target is the example's own index, batches of `batch_size` per rank, through
// ProjectConfiguration's numbered checkpoints in <out> (total_limit 1). "stop" saves after every
// batch of epoch 0 up to batch `stop_after` and stops there; "resume" loads the newest and trains
// to the end of epoch 1. Each rank writes "<epoch> <index>" for every example row it trained on
// (accelerator.example_rows(): the sampler's padding left out) to <out>/<mode>_rank<r>.txt.
void deal(const std::string& out, const std::string& mode, int64_t stop_after, int64_t batch_size, int64_t size,
          bool drop_last) {
  dist::AcceleratorOptions options;
  options.project_config = {.project_dir = out, .automatic_checkpoint_naming = true, .total_limit = 1};
  dist::Accelerator accelerator(options);
  auto model = accelerator.prepare(small_mlp());
  optim::SGD sgd(model->parameters(), {.lr = 0.01});
  accelerator.prepare(sgd);
  Generator generator(7);  // the same inputs on every rank and in every run
  const Tensor x = randn({size, 4}, {}, &generator);
  const Tensor index = arange(0, static_cast<double>(size), 1, {DType::f32}).reshape({size, 1});
  data::DataLoader loader =
      accelerator.prepare(std::make_shared<data::TensorDataset>(x, index),
                          {.batch_size = batch_size, .shuffle = true, .drop_last = drop_last, .seed = 9});
  int start_epoch = 0;
  if (mode == "resume")
    start_epoch = static_cast<int>(
        optim::metadata_integer(accelerator.load_state(*model), "epoch", "the newest checkpoint", 0, 2));
  std::ofstream seen(out + "/" + mode + "_rank" + std::to_string(accelerator.process_index()) + ".txt");
  for (int epoch = start_epoch; epoch < 2; ++epoch) {
    loader.set_epoch(epoch);
    int64_t batch_index = 0;
    for (const data::Batch& batch : loader) {
      const int64_t examples = *accelerator.example_rows();
      for (int64_t row = 0; row < examples; ++row) seen << epoch << ' ' << batch.target.data_ptr<float>()[row] << '\n';
      sgd.zero_grad();
      accelerator.backward((*model)(batch.input).pow(2.0).mean());
      accelerator.step(sgd);
      if (mode == "stop") {
        accelerator.save_state(*model, {{"epoch", std::to_string(epoch)}});
        if (batch_index == stop_after) return;
      }
      ++batch_index;
    }
  }
}

// Virtual ranks (train/virtual_ranks.h): 4 shards of 48 examples, batches of 3 per shard (4 steps
// per epoch), an MLP with dropout 0.3 (each shard's masks must not depend on the process that
// trains it), SGD with momentum, steps `from` .. `to` - 1. From step > 0 the run first loads
// <out>/<load>.safetensors (parameters and momentum); rank 0 saves both to <out>/<tag>.safetensors.
void virtual_ranks(const std::string& out, const std::string& tag, int64_t from, int64_t to, const std::string& load) {
  if (dist::launch_environment().has_value()) dist::init_process_group();
  Generator generator(11);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Dropout>(0.3), std::make_shared<nn::Linear>(8, 1, true, &generator)});
  optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  if (from > 0) optim::load_checkpoint(out + "/" + load + ".safetensors", *model, &sgd);
  dist::VirtualRanks shards(4, regression_data(48), {.batch_size = 3, .shuffle = true, .seed = 3}, *model);
  for (int64_t step = from; step < to; ++step) {
    shards.gradient(*model, step, [&](const data::Batch& batch) {
      return nn::functional::mse_loss((*model)(batch.input), batch.target);
    });
    sgd.step();
  }
  if (dist::get_rank() == 0) optim::save_checkpoint(out + "/" + tag + ".safetensors", *model, &sgd);
  if (dist::is_initialized()) dist::destroy_process_group();
}

// A short run in which rank 1 differs from rank 0 in `setting` alone: "lr", "optimizer" (SGD or
// Adam), "schedule" (the warm-up's length), "mixed_precision" (bf16 or f16), "seed" or
// "batch_size" of the shuffled loader, "vocabulary" (a field the program adds), or "none". Every rank must stop where
// the setting is compared; with "none" the run trains an epoch. The loader that does not shuffle gets a seed of its own
// on each rank: it seeds only augmentation then, which may differ.
void settings(const std::string& setting) {
  const std::optional<dist::LaunchEnvironment> environment = dist::launch_environment();
  const bool rank_1 = environment.has_value() && environment->rank == 1;
  const auto differs = [&](const std::string& name) { return rank_1 && setting == name; };
  dist::AcceleratorOptions options;
  options.mixed_precision = differs("mixed_precision") ? "f16" : "bf16";
  dist::Accelerator accelerator(options);
  accelerator.check_agreement("vocabulary", differs("vocabulary") ? "abd" : "abc");
  auto model = accelerator.prepare(small_mlp());
  const double lr = differs("lr") ? 0.01 : 0.001;
  std::unique_ptr<optim::Optimizer> optimizer;
  if (differs("optimizer"))
    optimizer = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = lr});
  else optimizer = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = lr});
  accelerator.prepare(*optimizer);
  // When they differ, rank 1's warm-up is one step longer.
  optim::WarmupCosineLR scheduler(*optimizer, differs("schedule") ? 21 : 20, 1000);
  accelerator.prepare(scheduler);
  data::DataLoader train_loader = accelerator.prepare(
      regression_data(40),
      {.batch_size = differs("batch_size") ? 8 : 4, .shuffle = true, .seed = differs("seed") ? 6u : 5u});
  data::DataLoader eval_loader = accelerator.prepare(
      regression_data(10), {.batch_size = 5, .seed = static_cast<uint64_t>(accelerator.process_index())});
  int64_t batches = 0;
  for (const data::Batch& batch : train_loader) {
    optimizer->zero_grad();
    Tensor loss;
    {
      const amp::AutocastGuard autocast = accelerator.autocast();
      loss = nn::functional::mse_loss((*model)(batch.input), batch.target);
    }
    accelerator.backward(loss);
    accelerator.step(*optimizer);
    ++batches;
  }
  std::cout << rank_name() << ": the settings agree, trained " << batches << " batches\n";
}

// Work that fails on the main process: a snapshot into a folder that is a file, and a
// main_process_first whose work throws there. Each rank prints what it caught, and whether it ran
// the work itself.
void failed_main_process(const std::string& out) {
  dist::Accelerator accelerator;
  auto model = accelerator.prepare(small_mlp());
  optim::SGD sgd(model->parameters(), {.lr = 0.1});
  accelerator.prepare(sgd);
  if (accelerator.is_main_process()) std::ofstream(out + "/a_file") << "not a folder";
  accelerator.wait_for_everyone();
  try {
    accelerator.save_state(out + "/a_file/state.safetensors", *model);
    std::cout << rank_name() << ": save_state returned\n";
  } catch (const std::exception& e) {
    std::cout << rank_name() << " caught: " << e.what() << "\n";
  }
  // A load that fails on one rank only (its file is missing) fails on every rank.
  accelerator.save_state(out + "/state.safetensors", *model);
  try {
    accelerator.load_state(out + (accelerator.process_index() == 1 ? "/missing.safetensors" : "/state.safetensors"),
                           *model);
    std::cout << rank_name() << ": load_state returned\n";
  } catch (const std::exception& e) {
    std::cout << rank_name() << " caught: " << e.what() << "\n";
  }
  try {
    accelerator.main_process_first([&] {
      std::cout << rank_name() << " runs the work\n";
      SG_CHECK(!accelerator.is_main_process(), "the data set could not be unpacked");
    });
  } catch (const std::exception& e) {
    std::cout << rank_name() << " caught: " << e.what() << "\n";
  }
}

// Each rank's random stream through a snapshot (Note [One random stream per rank] in
// train/accelerator.cpp). "save": set_seed(100, device_specific), rank r draws 3 + r times, saves
// <out>/state.safetensors, writes its next draws to <out>/saved_rank<r>.safetensors, draws on,
// loads the state and writes its next draws to reloaded_rank<r>.safetensors. "load": a fresh
// process seeded 7 + r loads <out>/state.safetensors and writes its next draws to
// resumed_rank<r>.safetensors.
void random_streams(const std::string& out, const std::string& mode) {
  dist::Accelerator accelerator;
  auto model = accelerator.prepare(small_mlp());
  const std::string snapshot = out + "/state.safetensors";
  const auto write_next_draws = [&](const std::string& tag) {
    save_safetensors(out + "/" + tag + "_rank" + std::to_string(accelerator.process_index()) + ".safetensors",
                     {{"draws", randn({6})}});
  };
  if (mode == "save") {
    dist::set_seed(100, /*device_specific=*/true);
    for (int draw = 0; draw < 3 + accelerator.process_index(); ++draw) randn({5});
    accelerator.save_state(snapshot, *model);
    write_next_draws("saved");
    randn({9});
    accelerator.load_state(snapshot, *model);
    write_next_draws("reloaded");
  } else {
    dist::set_seed(7, /*device_specific=*/true);
    accelerator.load_state(snapshot, *model);
    write_next_draws("resumed");
  }
}

void run(const std::string& scenario, const std::string& out, const test::WorkerArgument& arg) {
  if (scenario == "metrics") metrics(std::stoll(arg(3)), arg(4) == "even");
  else if (scenario == "train")
    train(out, arg(3), std::stoll(arg(4)), std::stoll(arg(5)), std::stoi(arg(6)), arg(7) == "even", std::stoi(arg(8)));
  else if (scenario == "resume") resume(out, arg(3), std::stoll(arg(4)), std::stoll(arg(5)));
  else if (scenario == "deal")
    deal(out, arg(3), std::stoll(arg(4)), std::stoll(arg(5)), std::stoll(arg(6)), arg(7) == "drop_last");
  else if (scenario == "virtual") virtual_ranks(out, arg(3), std::stoll(arg(4)), std::stoll(arg(5)), arg(6));
  else if (scenario == "settings") settings(arg(3));
  else if (scenario == "failed_main_process") failed_main_process(out);
  else if (scenario == "random_streams") random_streams(out, arg(3));
  else SG_FAIL("unknown scenario '", scenario, "'");
}

}  // namespace

int main(int argc, char** argv) { return test::run_worker(argc, argv, run); }
