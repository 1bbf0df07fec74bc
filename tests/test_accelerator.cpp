// dist::Accelerator on a single process: prepare leaves the model alone, the loader covers the
// data set, state round-trips, the mixed-precision pieces (autocast, scaler, unscale before
// clipping) are wired, and gradient accumulation steps when it should. Then on several processes
// (tests/dist_worker_accelerator.cpp): gather_for_metrics batch by batch, accumulation
// equivalence, uneven batches, mid-epoch resume, each rank's random stream through a snapshot.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dist_harness.h"
#include "helpers.h"

using namespace sg;

namespace {

std::shared_ptr<nn::Sequential> small_model() {
  Generator generator(11);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4, true, &generator), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(4, 2, true, &generator)});
}

void train_step(dist::Accelerator& accelerator, nn::Module& model, optim::Optimizer& optimizer) {
  optimizer.zero_grad();
  Tensor loss;
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    loss = model(randn({5, 3}, {}, &test::rng())).pow(2.0).mean();
  }
  accelerator.backward(loss);
  accelerator.step(optimizer);
}

// small_model() prepared with Adam and a StepLR: the state save_state and load_state carry.
struct PreparedRun {
  dist::Accelerator accelerator;
  std::shared_ptr<nn::Module> model = accelerator.prepare(small_model());
  optim::Adam optimizer{model->parameters(), {.lr = 0.01}};
  optim::StepLR scheduler{optimizer, 2, 0.5};

  PreparedRun() {
    accelerator.prepare(optimizer);
    accelerator.prepare(scheduler);
  }
  void train(int steps) {
    for (int step = 0; step < steps; ++step) {
      train_step(accelerator, *model, optimizer);
      scheduler.step();
    }
  }
};

}  // namespace

TEST_CASE("on one process the accelerator leaves the model as it is and the loader covers every example once") {
  REQUIRE(std::getenv("WORLD_SIZE") == nullptr);
  dist::Accelerator accelerator;
  CHECK(accelerator.num_processes() == 1);
  CHECK(accelerator.is_main_process());
  auto model = small_model();
  CHECK(accelerator.prepare(model).get() == model.get());
  CHECK(&accelerator.unwrap_model(*model) == model.get());

  auto dataset = std::make_shared<data::TensorDataset>(arange(0, 11, 1, {DType::f32}), arange(0, 11, 1, {DType::i64}));
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 4, .shuffle = true, .seed = 3});
  TensorList seen;
  for (const data::Batch& batch : loader) seen.push_back(accelerator.gather_for_metrics(batch.target));
  const Tensor all = cat(seen);
  CHECK(all.numel() == 11);
  CHECK(test::values(all.sum()) == std::vector<double>{55});  // 0 + 1 + ... + 10: each exactly once
}

TEST_CASE("gather_for_metrics names a tensor that is not one row per example of the batch") {
  dist::Accelerator accelerator;
  auto dataset = std::make_shared<data::TensorDataset>(randn({6, 3}, {}, &test::rng()), arange(0, 6, 1));
  for (const data::Batch& batch : accelerator.prepare(dataset, {.batch_size = 4})) {
    CHECK_THROWS_WITH_AS(accelerator.gather_for_metrics(batch.input.reshape({-1})),
                         doctest::Contains("one row per example of this process's batch"), Error);
    CHECK(accelerator.gather_for_metrics(batch.input.sum()).numel() == 1);  // a 0-dim value: one per rank
    break;
  }
  CHECK(accelerator.gather_for_metrics(randn({5}, {}, &test::rng())).numel() == 5);  // outside a loop: gather
}

TEST_CASE("accumulate: with k = 3 over 7 batches the optimizer steps after batches 3, 6 and 7 only") {
  dist::AcceleratorOptions options;
  options.gradient_accumulation_steps = 3;
  dist::Accelerator accelerator(options);
  auto model = accelerator.prepare(small_model());
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  optim::StepLR scheduler(optimizer, 1, 0.5);
  accelerator.prepare(optimizer);
  auto dataset =
      std::make_shared<data::TensorDataset>(randn({13, 3}, {}, &test::rng()), randn({13, 2}, {}, &test::rng()));
  std::vector<bool> synced;
  data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 2});
  CHECK(accelerator.optimizer_steps_per_epoch(loader) == 3);  // what a progress bar or a schedule counts
  for (const data::Batch& batch : loader) {
    const auto accumulation = accelerator.accumulate(*model);
    const Tensor before = model->parameters()[0].detach().clone();
    accelerator.backward(nn::functional::mse_loss((*model)(batch.input), batch.target));
    if (!accelerator.sync_gradients())
      CHECK_THROWS_WITH_AS(accelerator.clip_grad_norm_(model->parameters(), 1.0), doctest::Contains("sync_gradients"),
                           Error);
    CHECK(accelerator.step(optimizer) == accelerator.sync_gradients());
    accelerator.step(scheduler);
    accelerator.zero_grad(optimizer);
    synced.push_back(accelerator.sync_gradients());
    // Between steps the parameters stay and the gradients add up.
    CHECK((test::max_abs_diff(model->parameters()[0], before) == 0) == !accelerator.sync_gradients());
    CHECK(model->parameters()[0].grad().defined() == !accelerator.sync_gradients());
  }
  CHECK(synced == std::vector<bool>{false, false, true, false, false, true, true});
  CHECK(optimizer.lr(0) == 0.1 * 0.125);  // the scheduler stepped 3 times
  // A pass that skips the first 4 batches steps after batches 6 and 7 only: 2 steps, not 3.
  loader.skip_first_batches(4);
  CHECK(accelerator.optimizer_steps_in_next_pass(loader) == 2);
  int64_t steps_in_pass = 0;
  for (const data::Batch& batch : loader) {
    const auto accumulation = accelerator.accumulate(*model);
    CHECK(batch.input.size(0) > 0);
    steps_in_pass += accelerator.sync_gradients() ? 1 : 0;
  }
  CHECK(steps_in_pass == 2);
  CHECK(accelerator.optimizer_steps_in_next_pass(loader) == 3);
  // Outside a loop, every k-th call synchronises.
  for (int call = 1; call <= 6; ++call) {
    const auto accumulation = accelerator.accumulate(*model);
    CHECK(accelerator.sync_gradients() == (call % 3 == 0));
  }
}

TEST_CASE("accumulate: k = 4 micro-batches of 4 equal k = 1 batches of 16, the short last window included") {
  // 37 examples: windows of 16, 16 and 5 examples; each micro-batch's loss weighs its share.
  auto dataset =
      std::make_shared<data::TensorDataset>(randn({37, 3}, {}, &test::rng()), randn({37, 2}, {}, &test::rng()));
  const auto train = [&](int steps, int64_t batch_size) {
    dist::AcceleratorOptions options;
    options.gradient_accumulation_steps = steps;
    dist::Accelerator accelerator(options);
    auto model = accelerator.prepare(small_model());
    optim::SGD optimizer(model->parameters(), {.lr = 0.2, .momentum = 0.9});
    accelerator.prepare(optimizer);
    for (const data::Batch& batch : accelerator.prepare(dataset, {.batch_size = batch_size, .shuffle = true})) {
      const auto accumulation = accelerator.accumulate(*model);
      accelerator.backward(nn::functional::mse_loss((*model)(batch.input), batch.target));
      accelerator.step(optimizer);
      accelerator.zero_grad(optimizer);
    }
    return model->state_dict();
  };
  const nn::StateDict accumulated = train(4, 4), whole = train(1, 16);
  for (const auto& [name, value] : whole) {
    INFO(name);
    CHECK(test::max_abs_diff(accumulated.at(name), value) < 1e-6);
  }
}

TEST_CASE("clip_grad_norm_ takes a norm type, clip_grad_value_ clamps, both on the true gradients under f16") {
  dist::AcceleratorOptions options;
  options.mixed_precision = "f16";
  dist::Accelerator accelerator(options);
  auto model = accelerator.prepare(small_model());
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  accelerator.prepare(optimizer);
  const Tensor x = randn({5, 3}, {}, &test::rng());
  const auto scaled_backward = [&] {
    optimizer.zero_grad();
    Tensor loss;
    {
      const amp::AutocastGuard autocast = accelerator.autocast();
      loss = (*model)(x).pow(2.0).mean();
    }
    accelerator.backward(loss);
  };
  scaled_backward();
  TensorList grads;
  for (const Tensor& param : model->parameters()) grads.push_back(param.grad() / 65536.0);
  double max_abs = 0;
  for (const Tensor& grad : grads) max_abs = std::max(max_abs, grad.abs().max().item());
  CHECK(accelerator.clip_grad_norm_(model->parameters(), 1e9, optim::kInfNorm) ==
        doctest::Approx(max_abs).epsilon(1e-6));
  accelerator.step(optimizer);

  scaled_backward();
  accelerator.clip_grad_value_(model->parameters(), 1e-3);
  for (const Tensor& param : model->parameters())
    CHECK(param.grad().abs().max().item() <= static_cast<double>(static_cast<float>(1e-3)));
  CHECK(accelerator.step(optimizer));
}

TEST_CASE("set_seed seeds the default generator, main_process_first runs the work on one process") {
  dist::set_seed(42);
  const Tensor first = randn({4});
  dist::set_seed(42, /*device_specific=*/true);  // rank 0: the seed itself
  CHECK(test::max_abs_diff(randn({4}), first) == 0);
  dist::Accelerator accelerator;
  int runs = 0;
  accelerator.main_process_first([&] { ++runs; });
  accelerator.local_main_process_first([&] { ++runs; });
  CHECK(runs == 2);
}

TEST_CASE("mid-epoch: save_state inside the loop, load_state, and the loader resumes at the next batch") {
  const std::string path = "test_accelerator_mid_epoch.safetensors";
  auto dataset = std::make_shared<data::TensorDataset>(randn({23, 3}, {}, &test::rng()), arange(0, 23, 1));
  const data::DataLoaderOptions loader_options{.batch_size = 3, .shuffle = true, .num_workers = 2, .seed = 4};
  const auto targets_of = [](const data::Batch& batch) { return test::values(batch.target); };
  std::vector<std::vector<double>> uninterrupted;
  {
    dist::Accelerator accelerator;
    data::DataLoader loader = accelerator.prepare(dataset, loader_options);
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Batch& batch : loader) uninterrupted.push_back(targets_of(batch));
  }
  // 23 examples in batches of 3: 8 batches per epoch. Stop after batch 4 of epoch 0.
  auto model = small_model();
  {
    dist::Accelerator accelerator;
    data::DataLoader loader = accelerator.prepare(dataset, loader_options);
    int64_t batch_index = 0;
    for (const data::Batch& batch : loader) {
      CHECK(targets_of(batch) == uninterrupted[batch_index]);
      if (batch_index == 4) {
        accelerator.save_state(path, *model, {{"epoch", "0"}});
        break;
      }
      ++batch_index;
    }
  }
  uninterrupted.erase(uninterrupted.begin(), uninterrupted.begin() + 5);
  dist::Accelerator accelerator;
  data::DataLoader loader = accelerator.prepare(dataset, loader_options);
  CHECK(accelerator.load_state(path, *model).at("epoch") == "0");
  CHECK(accelerator.optimizer_steps_in_next_pass(loader) == 3);  // batches 5, 6 and 7 are left
  std::vector<std::vector<double>> resumed;
  for (int epoch = 0; epoch < 2; ++epoch) {
    if (epoch == 1) CHECK(accelerator.optimizer_steps_in_next_pass(loader) == 8);  // a whole epoch again
    for (const data::Batch& batch : loader) resumed.push_back(targets_of(batch));
  }
  CHECK(resumed == uninterrupted);  // epoch 0 from batch 5 on, then epoch 1 whole

  dist::Accelerator fewer_loaders;  // the state holds one loader's position
  CHECK_THROWS_WITH_AS(fewer_loaders.load_state(path, *model), doctest::Contains("1 prepared loader(s), but 0"), Error);
  std::filesystem::remove(path);
}

TEST_CASE("a loader position without a world size resumes at its batch, and one moved into a window deals the rest") {
  const std::string path = "test_accelerator_position_formats.safetensors";
  auto dataset = std::make_shared<data::TensorDataset>(randn({23, 3}, {}, &test::rng()), arange(0, 23, 1));
  const auto targets_of = [](const data::Batch& batch) { return test::values(batch.target); };
  auto model = small_model();
  std::vector<std::vector<double>> rest;  // epoch 0 after batch 4 of 3 examples: global sample 15
  {
    dist::Accelerator accelerator;
    data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 3, .shuffle = true, .seed = 4});
    int64_t batch_index = 0;
    for (const data::Batch& batch : loader) {
      if (batch_index == 4) accelerator.save_state(path, *model);
      if (batch_index++ > 4) rest.push_back(targets_of(batch));
    }
  }
  const SafetensorsFile saved = load_safetensors(path);
  CHECK(saved.metadata.at("loaders") == R"([{"batch":5,"epoch":0,"sample":15,"world_size":1}])");

  // Written before positions carried a world size: batch 5, as it is.
  optim::Metadata metadata = saved.metadata;
  metadata["loaders"] = R"([{"batch":5,"epoch":0}])";
  save_safetensors(path, saved.tensors, metadata);
  {
    dist::Accelerator accelerator;
    data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 3, .shuffle = true, .seed = 4});
    accelerator.load_state(path, *model);
    std::vector<std::vector<double>> resumed;
    for (const data::Batch& batch : loader) resumed.push_back(targets_of(batch));
    CHECK(resumed == rest);
  }
  // Batches of 5 reach sample 15 at batch 3, inside a window of 2 accumulated batches: the rest of
  // the epoch, positions 15 .. 22, is dealt anew in batches of 5 (a window beginning there).
  save_safetensors(path, saved.tensors, saved.metadata);
  const auto flattened = [](const std::vector<std::vector<double>>& batches) {
    std::vector<double> values;
    for (const auto& batch : batches) values.insert(values.end(), batch.begin(), batch.end());
    return values;
  };
  dist::AcceleratorOptions options;
  options.gradient_accumulation_steps = 2;
  {
    dist::Accelerator accelerator(options);
    data::DataLoader loader = accelerator.prepare(dataset, {.batch_size = 5, .shuffle = true, .seed = 4});
    accelerator.load_state(path, *model);
    std::vector<std::vector<double>> resumed;
    for (const data::Batch& batch : loader) resumed.push_back(targets_of(batch));
    CHECK(resumed.size() == 2);
    CHECK(flattened(resumed) == flattened(rest));
  }
  // With drop_last the dealt rest (8 examples) would end in a batch of 3 that is dropped: refused.
  dist::Accelerator accelerator(options);
  data::DataLoader loader =
      accelerator.prepare(dataset, {.batch_size = 5, .shuffle = true, .drop_last = true, .seed = 4});
  CHECK_THROWS_WITH_AS(accelerator.load_state(path, *model),
                       doctest::Contains("loader 0: saved by 1 process at global sample 15 of epoch 0 (their batch 5), "
                                         "which this run of 1 process with 5 examples each cannot resume at: "
                                         "dealt to 1 process, the epoch's remaining 8 examples leave 8 per process"),
                       Error);
  std::filesystem::remove(path);
}

namespace {

// The names in `folder`, sorted.
std::vector<std::string> names_in(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

dist::AcceleratorOptions project_options(const std::string& project_dir, int total_limit) {
  dist::AcceleratorOptions options;
  options.project_config = {
      .project_dir = project_dir, .automatic_checkpoint_naming = true, .total_limit = total_limit};
  return options;
}

}  // namespace

TEST_CASE("save_state without a path numbers checkpoint_i across restarts and keeps the total_limit newest") {
  test::TempDir project;
  const std::string checkpoints = project.path() + "/checkpoints";
  auto model = small_model();
  {
    dist::Accelerator accelerator(project_options(project.path(), 2));
    for (int i = 0; i < 3; ++i)
      CHECK(accelerator.save_state(*model, {{"i", std::to_string(i)}}) ==
            checkpoints + "/checkpoint_" + std::to_string(i));
    CHECK(names_in(checkpoints) == std::vector<std::string>{"checkpoint_1", "checkpoint_2"});
    CHECK(names_in(checkpoints + "/checkpoint_2") == std::vector<std::string>{"state.safetensors"});
  }
  dist::Accelerator restarted(project_options(project.path(), 2));  // a new run goes on counting
  CHECK(restarted.last_checkpoint() == checkpoints + "/checkpoint_2");
  CHECK(restarted.load_state(*model).at("i") == "2");
  CHECK(restarted.save_state(*model, {{"i", "3"}}) == checkpoints + "/checkpoint_3");
  CHECK(names_in(checkpoints) == std::vector<std::string>{"checkpoint_2", "checkpoint_3"});
  CHECK(restarted.load_state(*model).at("i") == "3");

  dist::Accelerator keeps_all(project_options(project.path(), 0));
  for (int i = 4; i < 7; ++i) keeps_all.save_state(*model);
  CHECK(names_in(checkpoints).size() == 5);
}

TEST_CASE("a failed save_state leaves the earlier checkpoints, and load_state never picks a partial tmp folder") {
  test::TempDir project;
  const std::string checkpoints = project.path() + "/checkpoints";
  auto model = small_model();
  dist::Accelerator accelerator(project_options(project.path(), 2));
  accelerator.save_state(*model, {{"i", "0"}});
  accelerator.save_state(*model, {{"i", "1"}});
  // A file where checkpoint_2 goes: the rename fails after the state is written in tmp-checkpoint_2.
  std::ofstream(checkpoints + "/checkpoint_2") << "in the way";
  const std::string failure = "Accelerator::save_state: writing checkpoint " + checkpoints + "/checkpoint_2";
  CHECK_THROWS_WITH_AS(accelerator.save_state(*model, {{"i", "2"}}), doctest::Contains(failure.c_str()), Error);
  CHECK(names_in(checkpoints) ==
        std::vector<std::string>{"checkpoint_0", "checkpoint_1", "checkpoint_2", "tmp-checkpoint_2"});
  // A crash while writing leaves a partial tmp- folder behind; the newest complete one is loaded.
  std::filesystem::create_directories(checkpoints + "/tmp-checkpoint_9");
  std::ofstream(checkpoints + "/tmp-checkpoint_9/state.safetensors") << "partial";
  CHECK(accelerator.last_checkpoint() == checkpoints + "/checkpoint_1");
  CHECK(accelerator.load_state(*model).at("i") == "1");
  std::filesystem::remove(checkpoints + "/checkpoint_2");
  CHECK(accelerator.save_state(*model, {{"i", "2"}}) == checkpoints + "/checkpoint_2");
  CHECK(names_in(checkpoints) == std::vector<std::string>{"checkpoint_1", "checkpoint_2", "tmp-checkpoint_9"});
}

TEST_CASE("save_state and load_state without a path name what ProjectConfiguration lacks") {
  auto model = small_model();
  dist::Accelerator accelerator;
  CHECK_THROWS_WITH_AS(accelerator.save_state(*model), doctest::Contains("needs ProjectConfiguration's project_dir"),
                       Error);
  test::TempDir project;
  dist::Accelerator empty(project_options(project.path(), 0));
  CHECK_THROWS_WITH_AS(empty.load_state(*model), doctest::Contains("holds no checkpoint_<i> folder"), Error);
  CHECK_THROWS_WITH_AS(dist::Accelerator(project_options(project.path(), -1)),
                       doctest::Contains("total_limit must be 0"), Error);
}

namespace {

// Runs tests/dist_worker_accelerator.cpp's `scenario` on `world` ranks; every rank must succeed.
test::RankResults run_scenario(int world, const std::vector<std::string>& args) {
  test::RankResults result = test::run_ranks(SG_DIST_WORKER_ACCELERATOR, world, args);
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  return result;
}

// The largest |a - b| over two parameter files.
double parameter_difference(const std::string& a, const std::string& b) {
  const SafetensorsFile first = load_safetensors(a), second = load_safetensors(b);
  REQUIRE(first.tensors.size() == second.tensors.size());
  double difference = 0;
  for (const auto& [name, value] : first.tensors)
    difference = std::max(difference, test::max_abs_diff(value, second.tensors.at(name)));
  return difference;
}

}  // namespace

TEST_CASE("a snapshot, a load or a main_process_first that fails on one rank stops every rank at once, quoting it") {
  test::TempDir out;
  const test::RankResults result = run_scenario(3, {"failed_main_process", out.path()});
  // The main process's own error, then the others' quoting it; nobody waits for a timeout.
  CHECK(test::contains(result.output(0), "rank 0 caught: write "));
  CHECK(test::contains(result.output(0), "Not a directory"));
  CHECK(test::contains(result.output(0), "rank 0 caught: the data set could not be unpacked"));
  for (int rank = 1; rank < 3; ++rank) {
    CAPTURE(rank);
    const std::string output = result.output(rank);
    CHECK(test::contains(output, "caught: Accelerator::save_state failed on rank 0, so every rank stops: "));
    CHECK(test::contains(output,
                         "caught: the work of the process that goes first failed on rank 0, so every rank "
                         "stops: the data set could not be unpacked"));
    CHECK_FALSE(test::contains(output, "runs the work"));
  }
  CHECK(test::contains(result.output(0), "rank 0 runs the work"));
  // The load fails on rank 1 only; the others restore their state and throw too.
  CHECK(test::contains(result.output(1), "rank 1 caught: "));
  CHECK(test::contains(result.output(1), "missing.safetensors"));
  for (int rank : {0, 2}) {
    CAPTURE(rank);
    CHECK(
        test::contains(result.output(rank), "caught: Accelerator::load_state failed on rank 1, so every rank stops: "));
    CHECK_FALSE(test::contains(result.output(rank), "load_state returned"));
  }
}

TEST_CASE("gather_for_metrics batch by batch on 3 ranks returns exactly the data set, in the sampler's order") {
  // 11 and 7 examples on 3 ranks: shares padded with 1 and 2 duplicates; with 7, two ranks'
  // last batches are all padding (their 0-dim values must go). Even and uneven batches alike.
  for (const std::string size : {"11", "7"})
    for (const std::string batches : {"even", "uneven"}) {
      CAPTURE(size);
      CAPTURE(batches);
      test::TempDir out;
      const test::RankResults result = run_scenario(3, {"metrics", out.path(), size, batches});
      for (int rank = 0; rank < 3; ++rank) CHECK(test::contains(result.output(rank), "metrics ok"));
    }
}

TEST_CASE("gradient accumulation on 2 ranks: k = 4 x batch 16 equals k = 1 x batch 64") {
  // 200 examples: 100 per rank, 7 micro-batches (the last of 4) and 2 optimizer steps per epoch.
  test::TempDir out;
  const test::RankResults accumulated =
      run_scenario(2, {"train", out.path(), "accumulated", "200", "16", "4", "even", "2"});
  run_scenario(2, {"train", out.path(), "whole", "200", "64", "1", "even", "2"});
  CHECK(test::contains(accumulated.output(0), "4 optimizer steps"));
  CHECK(parameter_difference(out.path() + "/accumulated.safetensors", out.path() + "/whole.safetensors") < 1e-5);
}

TEST_CASE("even_batches = false on 2 ranks: uneven last batches finish and equal one process on the whole batches") {
  // 17 examples, 4 per rank and step: rank 0 gets 9 (4, 4, 1), rank 1 gets 8 (4, 4) and a join
  // batch. One process with batches of 8 sees the same examples per step: 8, 8, 1.
  test::TempDir out;
  run_scenario(2, {"train", out.path(), "uneven", "17", "4", "1", "uneven", "2"});
  run_scenario(1, {"train", out.path(), "one", "17", "8", "1", "even", "2"});
  run_scenario(2, {"train", out.path(), "padded", "17", "4", "1", "even", "2"});
  CHECK(parameter_difference(out.path() + "/uneven.safetensors", out.path() + "/one.safetensors") < 1e-6);
  // Even batches train on a duplicate: a different (and here wrong) result, so the test can tell.
  CHECK(parameter_difference(out.path() + "/padded.safetensors", out.path() + "/one.safetensors") > 1e-4);
}

TEST_CASE("mid-epoch resume on 2 ranks sees the batches and reaches the parameters of an uninterrupted run") {
  test::TempDir out;
  run_scenario(2, {"resume", out.path(), "full", "0", "4"});
  run_scenario(2, {"resume", out.path(), "stop", "2", "4"});
  run_scenario(2, {"resume", out.path(), "resume", "0", "4"});
  for (const std::string rank : {"0", "1"}) {
    CAPTURE(rank);
    const std::string full = test::read_text(out.path() + "/full_rank" + rank + ".txt");
    const std::string stop = test::read_text(out.path() + "/stop_rank" + rank + ".txt");
    const std::string resumed = test::read_text(out.path() + "/resume_rank" + rank + ".txt");
    CHECK(std::count(stop.begin(), stop.end(), '\n') == 3);
    CHECK(stop + resumed == full);
  }
  CHECK(parameter_difference(out.path() + "/full.safetensors", out.path() + "/resume.safetensors") == 0);
}

namespace {

// The lines of a file the resume scenario wrote: the targets of one batch each.
std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream text(test::read_text(path));
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

// The numbers in `lines`, sorted.
std::vector<double> sorted_values(const std::vector<std::string>& lines) {
  std::vector<double> values;
  for (const std::string& line : lines) {
    std::istringstream numbers(line);
    for (double value; numbers >> value;) values.push_back(value);
  }
  std::sort(values.begin(), values.end());
  return values;
}

}  // namespace

TEST_CASE("a mid-epoch state of 2 ranks resumes on 1 process at the same global sample, in place or dealt anew") {
  // 50 examples, 4 per rank and batch: after batch 2 the ranks have trained on positions 0 .. 23
  // of epoch 0's list, which one process with batches of 4 reaches after its batch 5.
  test::TempDir two, one;
  run_scenario(2, {"resume", two.path(), "stop", "2", "4"});
  run_scenario(1, {"resume", one.path(), "full", "0", "4"});
  run_scenario(1, {"resume", two.path(), "resume", "0", "4"});
  const std::vector<std::string> full = lines_of(one.path() + "/full_rank0.txt");
  REQUIRE(full.size() == 26);  // 13 batches per epoch
  CHECK(lines_of(two.path() + "/resume_rank0.txt") == std::vector<std::string>(full.begin() + 6, full.end()));
  std::vector<std::string> stopped = lines_of(two.path() + "/stop_rank0.txt");
  for (const std::string& line : lines_of(two.path() + "/stop_rank1.txt")) stopped.push_back(line);
  CHECK(sorted_values(stopped) == sorted_values(std::vector<std::string>(full.begin(), full.begin() + 6)));
  // 24 is no multiple of 1 process x 5 examples: positions 24 .. 49 are dealt anew, in batches
  // of 5, so the examples come in the same order, grouped otherwise.
  run_scenario(1, {"resume", two.path(), "dealt", "0", "5"});
  const auto joined = [](const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) text += line;
    return text;
  };
  CHECK(joined(lines_of(two.path() + "/dealt_rank0.txt")) == joined({full.begin() + 6, full.end()}));
}

namespace {

// The (epoch, index) pairs the deal scenario's ranks wrote for `mode`, counted.
std::map<std::pair<int, int>, int> examples_trained(const std::string& out, const std::string& mode, int world) {
  std::map<std::pair<int, int>, int> count;
  for (int rank = 0; rank < world; ++rank) {
    std::istringstream text(test::read_text(out + "/" + mode + "_rank" + std::to_string(rank) + ".txt"));
    for (int epoch = 0, index = 0; text >> epoch >> index;) ++count[{epoch, index}];
  }
  return count;
}

}  // namespace

TEST_CASE("a run stopped mid-epoch on 2 ranks and resumed on 1 or 3 trains on every example of each epoch once") {
  // 50 examples, batches of 4 per rank: stopped after batch 1, at global sample 16. One process
  // with batches of 5, and three with batches of 4, have no batch beginning there: the remaining
  // 34 examples are dealt to them anew. The stopped run saved a numbered checkpoint per batch.
  for (const auto& [world, batch_size] : {std::pair<int, std::string>{1, "5"}, std::pair<int, std::string>{3, "4"},
                                          std::pair<int, std::string>{1, "4"}}) {
    CAPTURE(world);
    CAPTURE(batch_size);
    test::TempDir out;
    run_scenario(2, {"deal", out.path(), "stop", "1", "4", "50", "keep"});
    CHECK(std::filesystem::exists(out.path() + "/checkpoints/checkpoint_1"));
    CHECK_FALSE(std::filesystem::exists(out.path() + "/checkpoints/checkpoint_0"));  // total_limit 1
    run_scenario(world, {"deal", out.path(), "resume", "0", batch_size, "50", "keep"});
    std::map<std::pair<int, int>, int> trained = examples_trained(out.path(), "stop", 2);
    CHECK(trained.size() == 16);
    for (const auto& [example, count] : examples_trained(out.path(), "resume", world)) trained[example] += count;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (int index = 0; index < 50; ++index) {
        CAPTURE(epoch);
        CAPTURE(index);
        CHECK(trained[{epoch, index}] == 1);
      }
    CHECK(trained.size() == 100);
  }
  // With drop_last, one process with batches of 5 would drop the last 4 of the 34: refused.
  test::TempDir out;
  run_scenario(2, {"deal", out.path(), "stop", "1", "4", "50", "drop_last"});
  const test::RankResults refused =
      test::run_ranks(SG_DIST_WORKER_ACCELERATOR, 1, {"deal", out.path(), "resume", "0", "5", "50", "drop_last"});
  CHECK(refused.exit_code(0) == 3);
  CHECK(test::contains(refused.output(0), "checkpoint_1/state.safetensors: metadata 'loaders'"));
  CHECK(test::contains(refused.output(0), "saved by 2 processes at global sample 16 of epoch 0"));
  CHECK(test::contains(refused.output(0), "1 process with 5 examples each"));
  CHECK(test::contains(refused.output(0), "drop_last"));
}

TEST_CASE("virtual ranks: 4 shards on 4 processes, resumed on 2, and on 1 process take the same steps, bit for bit") {
  // 8 steps (2 epochs of 4): on 4 processes throughout; on 4 for 3 steps, then on 2; on 1.
  test::TempDir out;
  run_scenario(4, {"virtual", out.path(), "four", "0", "8", "-"});
  run_scenario(4, {"virtual", out.path(), "stopped", "0", "3", "-"});
  run_scenario(2, {"virtual", out.path(), "resumed", "3", "8", "stopped"});
  run_scenario(1, {"virtual", out.path(), "one", "0", "8", "-"});
  CHECK(parameter_difference(out.path() + "/four.safetensors", out.path() + "/resumed.safetensors") == 0);
  CHECK(parameter_difference(out.path() + "/four.safetensors", out.path() + "/one.safetensors") == 0);
  CHECK(parameter_difference(out.path() + "/four.safetensors", out.path() + "/stopped.safetensors") > 1e-4);
  // 3 processes cannot share 4 shards equally.
  const test::RankResults refused =
      test::run_ranks(SG_DIST_WORKER_ACCELERATOR, 3, {"virtual", out.path(), "three", "0", "1", "-"});
  CHECK(refused.exit_code(0) == 3);
  CHECK(test::contains(refused.output(0), "VirtualRanks: 3 processes must divide the 4 virtual ranks"));
}

namespace {

// The draws the random_streams scenario's `rank` wrote to <out>/<tag>_rank<rank>.safetensors.
Tensor draws_of(const std::string& out, const std::string& tag, int rank) {
  return load_safetensors(out + "/" + tag + "_rank" + std::to_string(rank) + ".safetensors").tensors.at("draws");
}

}  // namespace

TEST_CASE("each of 3 ranks seeded per device resumes its own random stream, reloaded and in a new run") {
  test::TempDir out;
  run_scenario(3, {"random_streams", out.path(), "save"});
  const test::RankResults resumed = run_scenario(3, {"random_streams", out.path(), "load"});
  CHECK(!test::contains(resumed.output(0), "holds the random streams of"));  // the same world size: nothing to say
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    const Tensor saved = draws_of(out.path(), "saved", rank);
    CHECK(test::max_abs_diff(draws_of(out.path(), "reloaded", rank), saved) == 0);
    CHECK(test::max_abs_diff(draws_of(out.path(), "resumed", rank), saved) == 0);
    for (int other = 0; other < rank; ++other)
      CHECK(test::max_abs_diff(draws_of(out.path(), "saved", other), saved) > 0);
  }
  // The entry a person reads: rank r's seed (100 + r) and offset (it drew 3 + r times) at index r.
  const auto states = nlohmann::json::parse(load_safetensors(out.path() + "/state.safetensors").metadata.at("rng"));
  REQUIRE(states.size() == 3);
  for (size_t rank = 0; rank < 3; ++rank) CHECK(states[rank].at("seed").get<uint64_t>() == 100 + rank);
  CHECK(states[0].at("offset").get<uint64_t>() < states[1].at("offset").get<uint64_t>());
}

TEST_CASE(
    "a snapshot of 2 ranks' random streams gives rank r of 3 processes the stream of rank r mod 2, of 1 rank 0's, "
    "and says so") {
  test::TempDir out;
  run_scenario(2, {"random_streams", out.path(), "save"});
  const test::RankResults three = run_scenario(3, {"random_streams", out.path(), "load"});
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    CHECK(test::max_abs_diff(draws_of(out.path(), "resumed", rank), draws_of(out.path(), "saved", rank % 2)) == 0);
  }
  // Said once, by the main process.
  const std::string notice =
      "holds the random streams of 2 process(es), this run has 3: rank r continues saved rank r % 2's";
  CHECK(test::contains(three.output(0), notice));
  CHECK(!test::contains(three.output(1), notice));
  const test::RankResults one = run_scenario(1, {"random_streams", out.path(), "load"});
  CHECK(test::max_abs_diff(draws_of(out.path(), "resumed", 0), draws_of(out.path(), "saved", 0)) == 0);
  CHECK(test::contains(one.output(0), "this run has 1: rank r continues saved rank r % 2's"));
}

TEST_CASE("an rng entry of one seed and offset, as older snapshots hold, puts every rank on that stream") {
  test::TempDir out;
  run_scenario(1, {"random_streams", out.path(), "save"});
  const std::string path = out.path() + "/state.safetensors";
  SafetensorsFile file = load_safetensors(path);
  file.metadata["rng"] = R"({"seed": 12345, "offset": 40})";
  save_safetensors(path, file.tensors, file.metadata);
  run_scenario(2, {"random_streams", out.path(), "load"});
  Generator stream(12345);
  stream.set_offset(40);
  const Tensor expected = randn({6}, {}, &stream);
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    CHECK(test::max_abs_diff(draws_of(out.path(), "resumed", rank), expected) == 0);
  }
}

TEST_CASE("ranks that differ in a setting all stop, naming the setting, each rank's value and the ranks") {
  const std::pair<std::string, std::string> cases[] = {
      {"lr", "ranks disagree on optimizer.lr: rank 0 has 0.001, rank 1 has 0.01"},
      {"optimizer", "ranks disagree on optimizer.type: rank 0 has SGD, rank 1 has Adam"},
      {"schedule", "ranks disagree on scheduler.lr_at_step_0: rank 0 has 4.76"},
      {"mixed_precision", "ranks disagree on accelerator.mixed_precision: rank 0 has bf16, rank 1 has f16"},
      {"seed", "ranks disagree on loaders[0].seed: rank 0 has 5, rank 1 has 6"},
      {"batch_size", "ranks disagree on loaders[0].batch_size: rank 0 has 4, rank 1 has 8"},
      {"vocabulary", "ranks disagree on vocabulary: rank 0 has abc, rank 1 has abd"},
  };
  for (const auto& [setting, message] : cases) {
    CAPTURE(setting);
    test::TempDir out;
    const test::RankResults result = test::run_ranks(SG_DIST_WORKER_ACCELERATOR, 2, {"settings", out.path(), setting});
    INFO(result.summary());
    CHECK(!result.timed_out);
    for (int rank = 0; rank < 2; ++rank) {
      CHECK(result.exit_code(rank) == 3);
      CHECK(test::contains(result.output(rank), message));
    }
  }
}

TEST_CASE("ranks that agree train, and a loader that does not shuffle may have a seed per rank") {
  test::TempDir out;
  const test::RankResults result = run_scenario(2, {"settings", out.path(), "none"});
  for (int rank = 0; rank < 2; ++rank)
    CHECK(test::contains(result.output(rank), "the settings agree, trained 5 batches"));
}

TEST_CASE("device cpu puts model and batches on the CPU, and without a GPU auto does too and cuda is an error") {
  dist::AcceleratorOptions options;
  options.device = "cpu";
  {
    dist::Accelerator accelerator(options);
    CHECK(accelerator.device() == Device::cpu());
    auto model = accelerator.prepare(small_model());
    for (const Tensor& param : model->parameters()) CHECK(param.device() == Device::cpu());
    auto dataset = std::make_shared<data::TensorDataset>(randn({6, 3}, {}, &test::rng()), arange(0, 6, 1));
    for (const data::Batch& batch : accelerator.prepare(dataset, {.batch_size = 4})) {
      CHECK(batch.input.device() == Device::cpu());
      CHECK(batch.target.device() == Device::cpu());
    }
  }
  options.device = "tpu";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains("\"auto\", \"cpu\" or \"cuda\""), Error);
  if (cuda::is_available()) return;  // a GPU machine: tests/cuda/test_cuda_training.cpp
  options.device = "auto";
  CHECK(dist::Accelerator(options).device() == Device::cpu());
  CHECK(dist::Accelerator().device() == Device::cpu());  // "auto" is the default
  options.device = "cuda";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains(cuda::unavailable_reason().c_str()), Error);
}

TEST_CASE("a prepared loader with pin_memory yields the same batches as one without, with and without workers") {
  // Page-locked copies on a machine with a GPU, the option ignored on one without: the same
  // examples in the same order either way.
  dist::AcceleratorOptions options;
  options.device = "cpu";
  dist::Accelerator accelerator(options);
  auto dataset = std::make_shared<data::TensorDataset>(randn({13, 2, 3}, {}, &test::rng()), arange(0, 13, 1));
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    data::DataLoader plain = accelerator.prepare(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers});
    data::DataLoader pinned =
        accelerator.prepare(dataset, {.batch_size = 4, .shuffle = true, .num_workers = workers, .pin_memory = true});
    auto plain_batch = plain.begin();
    int64_t batches = 0;
    for (const data::Batch& batch : pinned) {
      REQUIRE(plain_batch != plain.end());
      CHECK(batch.input.device() == Device::cpu());
      CHECK(test::max_abs_diff(batch.input, plain_batch->input) == 0);
      CHECK(test::values(batch.target) == test::values(plain_batch->target));
      ++plain_batch;
      ++batches;
    }
    CHECK(batches == 4);  // 13 examples: 4 + 4 + 4 + 1
  }
}

TEST_CASE("save_state and load_state round-trip model, optimizer, scheduler, RNG and metadata") {
  const std::string path = "test_accelerator_state.safetensors";
  PreparedRun run;
  auto& [accelerator, model, optimizer, scheduler] = run;
  run.train(3);
  manual_seed(1234);
  randn({7});  // move the default generator off its seed
  accelerator.save_state(path, *model, {{"epoch", "3"}});
  const nn::StateDict saved = model->state_dict();
  const uint64_t offset = default_generator().offset();
  const double lr = optimizer.lr(0);

  // Train on, then restore: everything returns to the saved point.
  run.train(2);
  randn({5});
  const optim::Metadata metadata = accelerator.load_state(path, *model);
  CHECK(metadata.at("epoch") == "3");
  CHECK(metadata.count("rng") == 0);  // the accelerator's own entries are consumed
  for (const auto& [name, value] : model->state_dict()) CHECK(test::max_abs_diff(value, saved.at(name)) == 0);
  CHECK(optimizer.lr(0) == lr);
  CHECK(scheduler.last_epoch() == 3);
  CHECK(default_generator().seed() == 1234);
  CHECK(default_generator().offset() == offset);
  CHECK_THROWS_WITH_AS(accelerator.save_state(path, *model, {{"rng", "mine"}}), doctest::Contains("reserved"), Error);
  std::filesystem::remove(path);
}

TEST_CASE("load_state names the file and the key of a scheduler or RNG entry it cannot restore") {
  const std::string path = "test_accelerator_bad_state.safetensors";
  PreparedRun run;
  auto& [accelerator, model, optimizer, scheduler] = run;
  accelerator.save_state(path, *model, {{"epoch", "1"}});
  const SafetensorsFile saved = load_safetensors(path);
  const auto load_with = [&](const std::string& key, const std::string& value) {
    optim::Metadata metadata = saved.metadata;
    metadata[key] = value;
    save_safetensors(path, saved.tensors, metadata);
    accelerator.load_state(path, *model);
  };
  const std::string where = "Accelerator::load_state: " + path + ": metadata ";
  const std::string negative_lr = where + "'scheduler': LRScheduler.load_state_dict: base_lrs[0] = -1";
  CHECK_THROWS_WITH_AS(load_with("scheduler", R"({"last_epoch": 3, "base_lrs": [-1.0]})"),
                       doctest::Contains(negative_lr.c_str()), Error);
  CHECK_THROWS_WITH_AS(load_with("scheduler", R"({"last_epoch": 3})"),
                       doctest::Contains((where + "'scheduler': ").c_str()), Error);
  CHECK_THROWS_WITH_AS(load_with("rng", "{not json"), doctest::Contains((where + "'rng': ").c_str()), Error);
  CHECK_THROWS_WITH_AS(load_with("rng", "[]"), doctest::Contains((where + "'rng': the entry holds no ").c_str()),
                       Error);
  CHECK_THROWS_WITH_AS(load_with("rng", R"([{"seed": 1}])"), doctest::Contains((where + "'rng': ").c_str()), Error);
  std::filesystem::remove(path);
}

TEST_CASE(
    "load_state is all or nothing: a file refused part-way leaves model, optimizer, scheduler and RNG as they were") {
  const std::string path = "test_accelerator_partial_state.safetensors";
  PreparedRun run;
  auto& [accelerator, model, optimizer, scheduler] = run;
  run.train(1);
  accelerator.save_state(path, *model, {{"epoch", "1"}});
  const SafetensorsFile saved = load_safetensors(path);
  run.train(2);  // the model, Adam's moments, the lr and the schedule now differ from the file's
  manual_seed(99);
  randn({3});

  const auto snapshot = [](const std::map<std::string, Tensor>& tensors) {
    std::map<std::string, Tensor> copies;
    for (const auto& [name, tensor] : tensors) copies[name] = tensor.clone();
    return copies;
  };
  const nn::StateDict model_before = snapshot(model->state_dict());
  const std::map<std::string, Tensor> moments_before = snapshot(optimizer.state_dict().tensors);
  const double lr_before = optimizer.lr(0);
  const int64_t epoch_before = scheduler.last_epoch();
  const uint64_t offset_before = default_generator().offset();
  REQUIRE(test::max_abs_diff(model_before.at("0.weight"), saved.tensors.at("model.0.weight")) > 0);

  // The "rng" entry is restored last but one, after the model, the optimizer and the scheduler
  // were loaded; "scheduler" fails after the model and the optimizer.
  for (const std::string key : {"rng", "scheduler"}) {
    CAPTURE(key);
    optim::Metadata metadata = saved.metadata;
    metadata[key] = "{not json";
    save_safetensors(path, saved.tensors, metadata);
    CHECK_THROWS_WITH_AS(accelerator.load_state(path, *model), doctest::Contains(("'" + key + "'").c_str()), Error);
    for (const auto& [name, value] : model->state_dict()) CHECK(test::max_abs_diff(value, model_before.at(name)) == 0);
    const auto moments = optimizer.state_dict().tensors;
    REQUIRE(moments.size() == moments_before.size());
    for (const auto& [name, value] : moments) CHECK(test::max_abs_diff(value, moments_before.at(name)) == 0);
    CHECK(optimizer.lr(0) == lr_before);
    CHECK(scheduler.last_epoch() == epoch_before);
    CHECK(default_generator().seed() == 99);
    CHECK(default_generator().offset() == offset_before);
  }

  // The same file with its entries intact loads, so the refusals above were the entries alone.
  save_safetensors(path, saved.tensors, saved.metadata);
  CHECK(accelerator.load_state(path, *model).at("epoch") == "1");
  CHECK(test::max_abs_diff(model->state_dict().at("0.weight"), saved.tensors.at("model.0.weight")) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("f16 mixed precision: autocast region, scaled backward, unscale before clipping") {
  dist::AcceleratorOptions options;
  options.mixed_precision = "fp8";
  CHECK_THROWS_WITH_AS(dist::Accelerator{options}, doctest::Contains("\"no\", \"f16\" or \"bf16\""), Error);
  options.mixed_precision = "f16";
  dist::Accelerator accelerator(options);
  CHECK(accelerator.scaler().is_enabled());
  CHECK(accelerator.scaler().get_scale() == 65536.0);
  auto model = accelerator.prepare(small_model());
  optim::SGD optimizer(model->parameters(), {.lr = 0.1});
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    CHECK((*model)(randn({2, 3})).dtype() == DType::f16);
  }
  const Tensor x = randn({5, 3}, {}, &test::rng());
  optimizer.zero_grad();
  CHECK_THROWS_WITH_AS(accelerator.clip_grad_norm_(model->parameters(), 1.0), doctest::Contains("prepare(optimizer)"),
                       Error);
  accelerator.prepare(optimizer);
  Tensor loss;
  {
    const amp::AutocastGuard autocast = accelerator.autocast();
    loss = (*model)(x).pow(2.0).mean();
  }
  accelerator.backward(loss);
  const Tensor scaled = model->parameters()[0].grad().clone();
  // The true norm: clipping must see the unscaled gradients (the scaled ones are 65536 times larger).
  const double norm = accelerator.clip_grad_norm_(model->parameters(), 1e9);
  CHECK(test::max_abs_diff(model->parameters()[0].grad() * 65536.0, scaled) < 1e-6 * (1 + scaled.abs().max().item()));
  CHECK(norm < 1e3);
  CHECK(accelerator.step(optimizer));
}
