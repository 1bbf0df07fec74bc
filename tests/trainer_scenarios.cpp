#include "trainer_scenarios.h"

#include <fstream>
#include <mutex>

namespace sg::test::trainer {

std::shared_ptr<data::TensorDataset> classification_data(int64_t size, uint64_t seed) {
  Generator generator(seed);
  const Tensor x = randn({size, 4}, {}, &generator);
  const Tensor scores = matmul(x, randn({4, 3}, {}, &generator)) + randn({size, 3}, {}, &generator) * 0.3;
  return std::make_shared<data::TensorDataset>(x, argmax(scores, 1));
}

std::shared_ptr<nn::Sequential> tiny_model(bool dropout) {
  Generator generator(11);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, true, &generator), std::make_shared<nn::LayerNorm>(Shape{8}),
      std::make_shared<nn::Tanh>()});
  if (dropout) model->push_back(std::make_shared<nn::Dropout>(0.2));
  model->push_back(std::make_shared<nn::Linear>(8, 3, true, &generator));
  return model;
}

dist::TrainingArguments reference_arguments(const std::string& output_dir, int64_t per_device, int accumulation) {
  return {.output_dir = output_dir,
          .per_device_train_batch_size = per_device,
          .num_train_epochs = 2,
          .learning_rate = 0.01,
          .weight_decay = 0.1,
          .warmup_steps = 3,
          .gradient_accumulation_steps = accumulation,
          .save_strategy = "no",
          .seed = kSeed,
          .report_to = {},
          .disable_tqdm = true};
}

void StopAt::on_step_end(const dist::TrainingArguments&, const dist::TrainerState& state,
                         dist::TrainerControl& control) {
  if (state.global_step != step) return;
  control.should_save = true;
  control.should_training_stop = true;
}

namespace {

// Records the first optimizer step of a run.
struct FirstStep : dist::TrainerCallback {
  void on_step_end(const dist::TrainingArguments&, const dist::TrainerState& state, dist::TrainerControl&) override {
    if (step == 0) step = state.global_step;
  }
  int64_t step = 0;
};

// A data set that writes the index of every example it hands out, one per line, to
// <log_prefix><rank>.txt (opened at the first example: the rank is known once the Trainer joined
// the process group).
class RecordingDataset : public data::Dataset {
public:
  RecordingDataset(std::shared_ptr<const data::Dataset> examples, std::string log_prefix)
      : examples_(std::move(examples)),
        log_prefix_(std::move(log_prefix)) {}
  int64_t size() const override { return examples_->size(); }
  data::Example get(int64_t index) const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!log_.is_open()) log_.open(log_prefix_ + std::to_string(dist::get_rank()) + ".txt");
    log_ << index << '\n' << std::flush;
    return examples_->get(index);
  }

private:
  std::shared_ptr<const data::Dataset> examples_;
  std::string log_prefix_;
  mutable std::mutex mutex_;
  mutable std::ofstream log_;
};

}  // namespace

void samples_scenario(const std::string& out, const std::string& tag, int64_t per_device, int64_t stop_at,
                      bool resume) {
  dist::TrainingArguments args = reference_arguments(out + "/run", per_device, 1);
  args.resume_from_checkpoint = resume;
  dist::Trainer trainer(tiny_model(), args,
                        std::make_shared<RecordingDataset>(classification_data(kExamples), out + "/" + tag + "_rank"));
  if (stop_at > 0) trainer.add_callback(std::make_shared<StopAt>(stop_at));
  trainer.train();
}

ScenarioRun resume_scenario(const std::string& out, const std::string& mode, int64_t stop_at) {
  dist::TrainingArguments args = reference_arguments(out + (mode == "full" ? "/full_run" : "/run"), 4, 2);
  args.logging_steps = 3;
  args.dataloader_num_workers = 2;
  args.resume_from_checkpoint = mode == "resume";
  auto first_step = std::make_shared<FirstStep>();
  dist::Trainer trainer(tiny_model(/*dropout=*/true), args, classification_data(kExamples), nullptr,
                        {.callbacks = {first_step}});
  if (mode == "stop") trainer.add_callback(std::make_shared<StopAt>(stop_at));
  ScenarioRun run{trainer.train(), {}, {}, 0};
  run.state = trainer.state();
  run.parameters = trainer.model().state_dict();
  run.first_step = first_step->step;
  return run;
}

}  // namespace sg::test::trainer
