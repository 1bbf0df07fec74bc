// dist::Trainer on one process: the parameters of a hand-written loop on the same batches (with
// and without accumulation), the learning-rate schedules, when evaluation and checkpoints happen,
// checkpoint rotation, mid-epoch resume, and the errors for bad arguments. Then on two processes
// (tests/dist_worker_trainer.cpp): the same parameters, resume, and compute_metrics over exactly
// the eval set.
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numbers>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dist_harness.h"
#include "helpers.h"
#include "trainer_scenarios.h"

using namespace sg;
using namespace sg::test::trainer;

namespace {

struct HandWritten {
  nn::StateDict parameters;
  double mean_loss = 0;  // over the optimizer steps
};

// What reference_arguments asks the Trainer for, written out: batches of kGlobalBatch in the
// order DistributedSampler gives one process, AdamW with weight decay on the Linear weights only,
// the linear schedule with 3 warm-up steps over kSteps, clipping at norm 1.
HandWritten hand_written_loop() {
  const auto data = classification_data(kExamples);
  auto model = tiny_model();
  std::map<std::string, Tensor> named;
  for (const auto& [name, param] : model->named_parameters()) named[name] = param;
  const optim::AdamWOptions decay{.lr = 0.01, .weight_decay = 0.1};
  optim::AdamWOptions no_decay = decay;
  no_decay.weight_decay = 0;
  optim::AdamW adamw({named["0.weight"], named["3.weight"]}, decay);
  adamw.add_param_group({named["0.bias"], named["1.weight"], named["1.bias"], named["3.bias"]}, no_decay);
  optim::LambdaLR schedule(adamw, [](int64_t step) {
    return step < 3 ? static_cast<double>(step) / 3 : static_cast<double>(kSteps - step) / (kSteps - 3);
  });
  HandWritten result;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const std::vector<int64_t> order = data::DistributedSampler(kExamples, 1, 0, true, kSeed).indices(epoch);
    for (int64_t begin = 0; begin < kExamples; begin += kGlobalBatch) {
      const auto end = order.begin() + std::min(begin + kGlobalBatch, kExamples);
      const Tensor rows = tensor(std::vector<int64_t>(order.begin() + begin, end));
      const Tensor loss = nn::functional::cross_entropy((*model)(data->inputs().index_select(0, rows)),
                                                        data->targets().index_select(0, rows));
      loss.backward();
      optim::clip_grad_norm_(model->parameters(), 1.0);
      adamw.step();
      schedule.step();
      adamw.zero_grad();
      result.mean_loss += loss.item() / kSteps;
    }
  }
  result.parameters = model->state_dict();
  return result;
}

double parameter_difference(const nn::StateDict& a, const nn::StateDict& b) {
  REQUIRE(a.size() == b.size());
  double difference = 0;
  for (const auto& [name, value] : a) difference = std::max(difference, test::max_abs_diff(value, b.at(name)));
  return difference;
}

// Records what the callbacks hear.
struct Recorder : dist::TrainerCallback {
  void on_train_begin(const dist::TrainingArguments&, const dist::TrainerState&, dist::TrainerControl&) override {
    events.push_back("train_begin");
  }
  void on_epoch_begin(const dist::TrainingArguments&, const dist::TrainerState&, dist::TrainerControl&) override {
    events.push_back("epoch_begin");
  }
  void on_epoch_end(const dist::TrainingArguments&, const dist::TrainerState&, dist::TrainerControl&) override {
    events.push_back("epoch_end");
  }
  void on_train_end(const dist::TrainingArguments&, const dist::TrainerState&, dist::TrainerControl&) override {
    events.push_back("train_end");
  }
  void on_evaluate(const dist::TrainingArguments&, const dist::TrainerState& state, dist::TrainerControl&,
                   const dist::Metrics& metrics) override {
    evaluated_at.push_back(state.global_step);
    last_metrics = metrics;
  }
  void on_save(const dist::TrainingArguments&, const dist::TrainerState& state, dist::TrainerControl&) override {
    saved_at.push_back(state.global_step);
  }
  std::vector<std::string> events;
  std::vector<int64_t> evaluated_at, saved_at;
  dist::Metrics last_metrics;
};

// The names in `folder`, sorted.
std::vector<std::string> entries(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The learning rate logged after each optimizer step, by step.
std::map<int64_t, double> logged_learning_rates(const dist::TrainerState& state) {
  std::map<int64_t, double> rates;
  for (const dist::Metrics& log : state.log_history)
    if (log.count("learning_rate") == 1) rates[static_cast<int64_t>(log.at("step"))] = log.at("learning_rate");
  return rates;
}

// Each checkpoint's state file as it was when written, by step.
struct SavedStateFiles : dist::TrainerCallback {
  void on_save(const dist::TrainingArguments& args, const dist::TrainerState& state, dist::TrainerControl&) override {
    bytes[state.global_step] =
        test::read_text(dist::checkpoint_folder(args.output_dir, state.global_step) + "/state.safetensors");
  }
  std::map<int64_t, std::string> bytes;
};

// cross_entropy, made NaN from its `from`-th call on (one call per optimizer step without
// accumulation or evaluation), as a diverged run's loss: its gradients are NaN too, so each such
// step writes NaN into the weights.
dist::ComputeLoss nan_from_call(int64_t from) {
  return [calls = std::make_shared<int64_t>(0), from](const Tensor& outputs, const Tensor& labels) {
    const Tensor loss = nn::functional::cross_entropy(outputs, labels);
    return ++*calls >= from ? loss * std::numeric_limits<double>::quiet_NaN() : loss;
  };
}

}  // namespace

TEST_CASE("the trainer on one process reaches the parameters of a hand-written loop, with and without accumulation") {
  REQUIRE(std::getenv("WORLD_SIZE") == nullptr);
  const HandWritten expected = hand_written_loop();
  // 16 per step as one batch, and as 4 micro-batches of 4 (the last window: 2 of them).
  for (const auto& [per_device, accumulation] : {std::pair{16, 1}, std::pair{4, 4}}) {
    CAPTURE(accumulation);
    test::TempDir out;
    dist::Trainer trainer(tiny_model(), reference_arguments(out.path(), per_device, accumulation),
                          classification_data(kExamples));
    const dist::TrainOutput result = trainer.train();
    CHECK(result.global_step == kSteps);
    CHECK(trainer.state().epoch == 2.0);
    // Float sums in another order, amplified a little by Adam's normalisation over 10 steps.
    CHECK(parameter_difference(trainer.model().state_dict(), expected.parameters) < 1e-5);
    CHECK(result.training_loss == doctest::Approx(expected.mean_loss).epsilon(1e-5));
    CHECK(result.metrics.at("train_loss") == result.training_loss);
  }
}

TEST_CASE("trainer schedules linear, cosine and constant warm up and then follow HF's formulas step by step") {
  struct Schedule {
    std::string type;
    int64_t warmup_steps;
    double warmup_ratio;
    int64_t warmup;  // what the test expects: warmup_steps, or ceil(ratio * 12)
  };
  const double lr = 0.1;
  const int64_t total = 12;
  for (const Schedule& schedule :
       {Schedule{"linear", 3, 0.0, 3}, Schedule{"cosine", 0, 0.3, 4}, Schedule{"constant", 2, 0.5, 2}}) {
    CAPTURE(schedule.type);
    const auto expected = [&](int64_t step) {
      const auto s = static_cast<double>(step), w = static_cast<double>(schedule.warmup);
      if (step < schedule.warmup) return lr * s / w;
      if (schedule.type == "linear") return lr * (total - s) / (total - w);
      if (schedule.type == "cosine") return lr * 0.5 * (1 + std::cos(std::numbers::pi * (s - w) / (total - w)));
      return lr;
    };
    test::TempDir out;
    dist::TrainingArguments args = reference_arguments(out.path(), 8, 1);
    args.max_steps = total;  // 9 steps per epoch: into the second epoch
    args.learning_rate = lr;
    args.lr_scheduler_type = schedule.type;
    args.warmup_steps = schedule.warmup_steps;
    args.warmup_ratio = schedule.warmup_ratio;
    args.logging_steps = 1;
    args.report_to = {"csv", "tensorboard"};
    dist::Trainer trainer(tiny_model(), args, classification_data(kExamples));
    trainer.train();
    const std::map<int64_t, double> rates = logged_learning_rates(trainer.state());
    REQUIRE(rates.size() == total);
    for (const auto& [step, rate] : rates) {
      CAPTURE(step);
      CHECK(rate == doctest::Approx(expected(step)).epsilon(1e-12));
    }
    const std::string csv = test::read_text(out.path() + "/log.csv");
    CHECK(csv.starts_with("step,epoch,name,value\n"));
    CHECK(test::contains(csv, "\n12,1.333333333,learning_rate,"));
    CHECK(entries(out.path() + "/runs").size() == 1);  // one TensorBoard event file
  }
}

TEST_CASE("trainer eval_strategy steps and epoch evaluate after the right optimizer steps, with eval_ metrics") {
  struct Case {
    std::string strategy;
    int64_t eval_steps, logging_steps;
    std::vector<int64_t> expected;
  };
  // 5 optimizer steps per epoch, 2 epochs; eval_steps 0 falls back to logging_steps.
  for (const Case& c : {Case{"steps", 3, 500, {3, 6, 9}}, Case{"steps", 0, 4, {4, 8}}, Case{"epoch", 0, 500, {5, 10}},
                        Case{"no", 0, 500, {}}}) {
    CAPTURE(c.strategy);
    CAPTURE(c.eval_steps);
    test::TempDir out;
    dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
    args.eval_strategy = c.strategy;
    args.eval_steps = c.eval_steps;
    args.logging_steps = c.logging_steps;
    auto recorder = std::make_shared<Recorder>();
    const auto accuracy = [](const dist::EvalPrediction& eval) {
      return dist::Metrics{{"accuracy", eq(argmax(eval.predictions, 1), eval.label_ids).to(DType::f32).mean().item()}};
    };
    dist::Trainer trainer(tiny_model(), args, classification_data(kExamples), classification_data(13, 8),
                          {.compute_metrics = accuracy, .callbacks = {recorder}});
    trainer.train();
    CHECK(recorder->evaluated_at == c.expected);
    CHECK(recorder->events ==
          std::vector<std::string>{"train_begin", "epoch_begin", "epoch_end", "epoch_begin", "epoch_end", "train_end"});
    const dist::Metrics metrics = trainer.evaluate();
    for (const char* key : {"eval_loss", "eval_accuracy", "eval_runtime", "eval_samples_per_second"})
      CHECK(metrics.count(key) == 1);
    CHECK(metrics.at("eval_accuracy") * 13 == doctest::Approx(std::round(metrics.at("eval_accuracy") * 13)));
    CHECK(recorder->last_metrics == metrics);
    CHECK(trainer.state().log_history.back().at("eval_loss") == metrics.at("eval_loss"));
  }
}

TEST_CASE("trainer save_total_limit keeps the newest checkpoints, and the best one when a metric is tracked") {
  test::TempDir out;
  dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
  args.max_steps = 9;
  args.save_strategy = "steps";
  args.save_steps = 2;
  args.save_total_limit = 2;
  auto recorder = std::make_shared<Recorder>();
  nn::StateDict trained;
  {
    dist::Trainer trainer(tiny_model(), args, classification_data(kExamples), nullptr, {.callbacks = {recorder}});
    trainer.train();
    trained = trainer.model().state_dict();
  }
  CHECK(recorder->saved_at == std::vector<int64_t>{2, 4, 6, 8, 9});  // and at the last step
  CHECK(entries(out.path()) == std::vector<std::string>{"checkpoint-8", "checkpoint-9"});
  CHECK(entries(out.path() + "/checkpoint-9") == std::vector<std::string>{"state.safetensors", "trainer_state.json"});
  CHECK(dist::get_last_checkpoint(out.path()) == out.path() + "/checkpoint-9");
  const dist::TrainerState saved =
      dist::TrainerState::from_json(test::read_text(out.path() + "/checkpoint-9/trainer_state.json"));
  CHECK(saved.global_step == 9);
  auto model = tiny_model();  // the state file holds the model as optim::load_checkpoint reads it
  optim::load_checkpoint(out.path() + "/checkpoint-9/state.safetensors", *model);
  CHECK(parameter_difference(model->state_dict(), trained) == 0);

  // The score is best at the first evaluation (step 2): that checkpoint stays with the newest.
  test::TempDir best;
  args.output_dir = best.path();
  args.eval_strategy = "steps";
  args.eval_steps = 2;
  args.metric_for_best_model = "score";
  int evaluations = 0;
  const auto score = [&](const dist::EvalPrediction&) {
    return dist::Metrics{{"score", ++evaluations == 1 ? 10.0 : 1.0 * evaluations}};
  };
  dist::Trainer trainer(tiny_model(), args, classification_data(kExamples), classification_data(5, 8),
                        {.compute_metrics = score});
  trainer.train();
  CHECK(entries(best.path()) == std::vector<std::string>{"checkpoint-2", "checkpoint-9"});
  CHECK(trainer.state().best_metric == 10.0);
  CHECK(trainer.state().best_global_step == 2);
  CHECK(trainer.state().best_model_checkpoint == best.path() + "/checkpoint-2");
}

TEST_CASE(
    "a trainer run stopped mid-epoch by a callback and resumed from its checkpoint ends as an uninterrupted one") {
  // 9 optimizer steps per epoch: the stop after step 11 is in epoch 2, between two logs.
  test::TempDir out;
  const ScenarioRun full = resume_scenario(out.path(), "full", 0);
  const ScenarioRun stopped = resume_scenario(out.path(), "stop", 11);
  CHECK(stopped.result.global_step == 11);
  CHECK(dist::get_last_checkpoint(out.path() + "/run") == out.path() + "/run/checkpoint-11");
  const ScenarioRun resumed = resume_scenario(out.path(), "resume", 0);
  CHECK(resumed.first_step == 12);
  CHECK(resumed.result.global_step == 18);
  CHECK(parameter_difference(resumed.parameters, full.parameters) == 0);
  CHECK(resumed.result.training_loss == doctest::Approx(full.result.training_loss).epsilon(1e-6));
  // The log history: the checkpoint's, then the resumed steps', as the uninterrupted run logged them.
  REQUIRE(resumed.state.log_history.size() == full.state.log_history.size());
  for (size_t i = 0; i < full.state.log_history.size(); ++i) {
    for (const auto& [name, value] : full.state.log_history[i]) {
      CAPTURE(name);
      if (name.ends_with("runtime") || name.ends_with("per_second")) continue;
      CHECK(resumed.state.log_history[i].at(name) == doctest::Approx(value).epsilon(1e-6));
    }
  }
}

TEST_CASE("trainer stops after max_nonfinite_steps NaN losses in a row, naming the step they began at") {
  test::TempDir out;
  dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
  args.save_strategy = "steps";
  args.save_steps = 2;
  args.max_nonfinite_steps = 2;
  auto saved = std::make_shared<SavedStateFiles>();
  dist::Trainer trainer(tiny_model(), args, classification_data(kExamples), nullptr,
                        {.compute_loss_func = nan_from_call(3), .callbacks = {saved}});
  // Steps 3 and 4 are NaN: it stops inside step 4, before that step's checkpoint.
  CHECK_THROWS_WITH_AS(trainer.train(),
                       doctest::Contains("at step 3 and stayed so for 2 consecutive steps, to step 4, so training "
                                         "stopped (TrainingArguments.max_nonfinite_steps 2; 0 never stops)"),
                       Error);
  CHECK(trainer.state().global_step == 4);
  CHECK(entries(out.path()) == std::vector<std::string>{"checkpoint-2"});
  CHECK(test::read_text(out.path() + "/checkpoint-2/state.safetensors") == saved->bytes.at(2));
}

TEST_CASE("trainer never writes a checkpoint from NaN weights, even with max_nonfinite_steps 0") {
  test::TempDir out;
  dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
  args.save_strategy = "steps";
  args.save_steps = 2;
  args.max_nonfinite_steps = 0;  // trains on through the NaN losses of steps 3 and 4
  auto saved = std::make_shared<SavedStateFiles>();
  dist::Trainer trainer(tiny_model(), args, classification_data(kExamples), nullptr,
                        {.compute_loss_func = nan_from_call(3), .callbacks = {saved}});
  std::string message;
  try {
    trainer.train();
  } catch (const Error& error) {
    message = error.what();
  }
  CHECK(test::contains(message, "not writing " + out.path() + "/checkpoint-4 after step 4: the model's "));
  CHECK(test::contains(message, "(the loss first went non-finite at step 3)"));
  CHECK(entries(out.path()) == std::vector<std::string>{"checkpoint-2"});  // no checkpoint-4, no tmp- folder
  CHECK(test::read_text(out.path() + "/checkpoint-2/state.safetensors") == saved->bytes.at(2));
}

TEST_CASE("bad trainer arguments are errors naming the argument and its value") {
  test::TempDir out;
  const auto data = classification_data(kExamples);
  struct Case {
    std::function<void(dist::TrainingArguments&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& a) { a.output_dir = ""; }, "output_dir must be set"},
      {[](auto& a) { a.per_device_train_batch_size = 0; }, "per_device_train_batch_size must be at least 1, got 0"},
      {[](auto& a) { a.num_train_epochs = 0; }, "num_train_epochs must be positive unless max_steps is set, got 0"},
      {[](auto& a) { a.max_steps = 0; }, "max_steps must be -1 (train num_train_epochs) or at least 1, got 0"},
      {[](auto& a) { a.learning_rate = -1; }, "learning_rate must be finite and >= 0, got -1"},
      {[](auto& a) { a.adam_beta2 = 1; }, "adam_beta2 must be in [0, 1), got 1"},
      {[](auto& a) { a.lr_scheduler_type = "polynomial"; },
       "lr_scheduler_type must be one of \"linear\", \"cosine\", \"constant\", \"constant_with_warmup\", got "
       "\"polynomial\""},
      {[](auto& a) { a.warmup_ratio = 1.5; }, "warmup_ratio must be in [0, 1], got 1.5"},
      {[](auto& a) { a.gradient_accumulation_steps = 0; }, "gradient_accumulation_steps must be at least 1, got 0"},
      {[](auto& a) { a.max_grad_norm = -1; }, "max_grad_norm must be finite and >= 0 (0: no clipping), got -1"},
      {[](auto& a) { a.max_nonfinite_steps = -1; }, "max_nonfinite_steps must be >= 0 (0: never stop), got -1"},
      {[](auto& a) { a.ddp_check_replicas_every = -1; }, "ddp_check_replicas_every must be >= 0 (0: never), got -1"},
      {[](auto& a) { a.mixed_precision = "fp16"; },
       "mixed_precision must be one of \"no\", \"f16\", \"bf16\", got \"fp16\""},
      {[](auto& a) { a.eval_strategy = "always"; },
       "eval_strategy must be one of \"no\", \"steps\", \"epoch\", got \"always\""},
      {[](auto& a) {
         a.save_strategy = "steps";
         a.save_steps = 0;
       },
       "save_steps must be at least 1 when its strategy is \"steps\", got 0"},
      {[](auto& a) { a.save_total_limit = -1; }, "save_total_limit must be >= 0 (0: keep every checkpoint), got -1"},
      {[](auto& a) { a.report_to = {"wandb"}; }, "report_to must be one of \"csv\", \"tensorboard\", got \"wandb\""},
      {[](auto& a) { a.resume_from_checkpoint = std::string(); }, "resume_from_checkpoint must be a checkpoint folder"},
      {[](auto& a) { a.eval_strategy = "epoch"; },
       "eval_strategy is \"epoch\", but the Trainer was given no eval_dataset"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
    c.change(args);
    CHECK_THROWS_WITH_AS(dist::Trainer(tiny_model(), args, data),
                         doctest::Contains(("TrainingArguments: " + c.message).c_str()), Error);
  }
  // Found out when training starts: no checkpoint to resume from.
  dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
  args.resume_from_checkpoint = true;
  CHECK_THROWS_WITH_AS(dist::Trainer(tiny_model(), args, data).train(),
                       doctest::Contains("resume_from_checkpoint is true, but output_dir"), Error);
  args.resume_from_checkpoint = out.path() + "/checkpoint-7";
  CHECK_THROWS_WITH_AS(dist::Trainer(tiny_model(), args, data).train(),
                       doctest::Contains("checkpoint-7' holds no state.safetensors"), Error);
  args.resume_from_checkpoint = false;
  args.metric_for_best_model = "f1";
  dist::Trainer trainer(tiny_model(), args, data, classification_data(5, 8));
  CHECK_THROWS_WITH_AS(trainer.evaluate(),
                       doctest::Contains("metric_for_best_model is \"f1\", but evaluate() gave no 'eval_f1'"), Error);
}

TEST_CASE("a checkpoint whose step or position is out of range is refused naming the file and the field") {
  test::TempDir out;
  dist::TrainingArguments args = reference_arguments(out.path(), 16, 1);
  args.max_steps = 3;
  args.save_strategy = "steps";
  args.save_steps = 2;
  dist::Trainer(tiny_model(), args, classification_data(kExamples)).train();
  const std::string folder = out.path() + "/checkpoint-2";
  const std::string file = folder + "/state.safetensors";
  const SafetensorsFile saved = load_safetensors(file);
  args.resume_from_checkpoint = folder;
  const auto refusal = [&] {
    try {
      dist::Trainer(tiny_model(), args, classification_data(kExamples)).train();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(accepted)");
  };
  struct Case {
    std::string entry, field;
    int64_t value;
  };
  for (const Case& c : {Case{"trainer_state", "global_step", -5}, Case{"trainer_state", "max_steps", -1},
                        Case{"trainer_loop", "batch", -1}, Case{"trainer_loop", "epoch", -2},
                        Case{"trainer_loop", "sample", -4}, Case{"trainer_loop", "last_logged_step", -1}}) {
    CAPTURE(c.entry);
    CAPTURE(c.field);
    std::map<std::string, std::string> metadata = saved.metadata;
    nlohmann::json json = nlohmann::json::parse(metadata.at(c.entry));
    json[c.field] = c.value;
    metadata[c.entry] = json.dump();
    save_safetensors(file, saved.tensors, metadata);
    const std::string message = refusal();
    CAPTURE(message);
    CHECK(test::contains(message, file + ": metadata '" + c.entry + "'"));
    CHECK(test::contains(message, c.field + " " + std::to_string(c.value)));
  }
  // The training loader's position in the Accelerator's own entry.
  std::map<std::string, std::string> metadata = saved.metadata;
  nlohmann::json loaders = nlohmann::json::parse(metadata.at("loaders"));
  loaders[0]["batch"] = -3;
  metadata["loaders"] = loaders.dump();
  save_safetensors(file, saved.tensors, metadata);
  const std::string message = refusal();
  CHECK(test::contains(message, file + ": metadata 'loaders'"));
  CHECK(test::contains(message, "loader 0: batch -3"));

  // Written before the world size was recorded: resumed at its batch, as then.
  metadata = saved.metadata;
  for (const char* entry : {"trainer_state", "trainer_loop"}) {
    nlohmann::json json = nlohmann::json::parse(metadata.at(entry));
    json.erase("world_size");
    json.erase("sample");
    metadata[entry] = json.dump();
  }
  metadata["loaders"] = R"([{"batch":2,"epoch":0}])";
  save_safetensors(file, saved.tensors, metadata);
  CHECK(refusal() == "(accepted)");
}

namespace {

// Runs tests/dist_worker_trainer.cpp's `scenario` on `world` ranks; every rank must succeed.
test::RankResults run_scenario(int world, const std::vector<std::string>& args) {
  test::RankResults result = test::run_ranks(SG_DIST_WORKER_TRAINER, world, args);
  INFO(result.summary());
  REQUIRE(result.all_succeeded());
  return result;
}

nn::StateDict load_parameters(const std::string& path) { return load_safetensors(path).tensors; }

// The data set indices a samples_scenario process wrote, in order.
std::vector<int64_t> recorded_indices(const std::string& path) {
  std::vector<int64_t> indices;
  std::istringstream lines(test::read_text(path));
  for (int64_t index; lines >> index;) indices.push_back(index);
  return indices;
}

}  // namespace

TEST_CASE("the trainer on 2 processes reaches the hand-written loop's parameters, and only rank 0 prints the summary") {
  const HandWritten expected = hand_written_loop();
  test::TempDir out;
  // 8 per rank and step as one batch, and as 2 micro-batches of 4.
  const test::RankResults whole = run_scenario(2, {"train", out.path(), "whole", "8", "1"});
  run_scenario(2, {"train", out.path(), "accumulated", "4", "2"});
  CHECK(parameter_difference(load_parameters(out.path() + "/whole.safetensors"), expected.parameters) < 1e-5);
  CHECK(parameter_difference(load_parameters(out.path() + "/accumulated.safetensors"), expected.parameters) < 1e-5);
  for (const char* line : {"***** Running training *****", "  Num examples = 72\n", "  Num Epochs = 2\n",
                           "  Instantaneous batch size per device = 8\n",
                           "  Total train batch size (w. parallel, distributed & accumulation) = 16\n",
                           "  Gradient Accumulation steps = 1\n", "  Total optimization steps = 10\n",
                           "  Number of trainable parameters = 83\n"}) {
    CHECK(test::contains(whole.output(0), line));
    CHECK(!test::contains(whole.output(1), line));
  }
}

TEST_CASE("on 2 processes a trainer run stopped mid-epoch and resumed ends with the uninterrupted run's parameters") {
  // 5 optimizer steps per epoch on each rank (9 micro-batches, the last window of 1): step 7 is
  // inside epoch 2.
  test::TempDir out;
  run_scenario(2, {"resume", out.path(), "full", "0"});
  run_scenario(2, {"resume", out.path(), "stop", "7"});
  run_scenario(2, {"resume", out.path(), "resume", "0"});
  CHECK(parameter_difference(load_parameters(out.path() + "/full.safetensors"),
                             load_parameters(out.path() + "/resume.safetensors")) == 0);
  CHECK(parameter_difference(load_parameters(out.path() + "/full.safetensors"),
                             load_parameters(out.path() + "/stop.safetensors")) > 1e-4);
}

TEST_CASE("a trainer checkpoint of 2 processes resumes on 1 at the same global sample, or is refused naming both") {
  // 4 examples per process and step: after step 3 the 2 processes have trained on positions
  // 0 .. 23 of epoch 0's list (rank r on positions r, r + 2, ...). One process resumes at its
  // batch 6 (24 / 4), not at batch 3.
  test::TempDir out;
  run_scenario(2, {"samples", out.path(), "stop", "4", "3", "fresh"});
  // 24 is no multiple of 1 process x 5 examples.
  const test::RankResults refused =
      test::run_ranks(SG_DIST_WORKER_TRAINER, 1, {"samples", out.path(), "refused", "5", "0", "resume"});
  CHECK(refused.exit_code(0) == 3);
  CHECK(test::contains(refused.output(0), "checkpoint-3"));
  CHECK(test::contains(refused.output(0), "saved by 2 processes at global sample 24 of epoch 0"));
  CHECK(test::contains(refused.output(0), "1 process with 5 examples each"));
  run_scenario(1, {"samples", out.path(), "resume", "4", "0", "resume"});

  const std::vector<int64_t> epoch0 = data::DistributedSampler(kExamples, 1, 0, true, kSeed).indices(0);
  const std::vector<int64_t> epoch1 = data::DistributedSampler(kExamples, 1, 0, true, kSeed).indices(1);
  for (int64_t rank = 0; rank < 2; ++rank) {
    std::vector<int64_t> expected;
    for (int64_t position = rank; position < 24; position += 2) expected.push_back(epoch0[position]);
    CHECK(recorded_indices(out.path() + "/stop_rank" + std::to_string(rank) + ".txt") == expected);
  }
  std::vector<int64_t> rest(epoch0.begin() + 24, epoch0.end());
  rest.insert(rest.end(), epoch1.begin(), epoch1.end());
  CHECK(recorded_indices(out.path() + "/resume_rank0.txt") == rest);
}

TEST_CASE("trainer compute_metrics on 2 processes sees exactly the 11 examples of the eval set, in order") {
  test::TempDir out;
  const test::RankResults result = run_scenario(2, {"metrics", out.path(), "11"});
  for (int rank = 0; rank < 2; ++rank) CHECK(test::contains(result.output(rank), "metrics ok"));
}
