#pragma once
// defines: what the Trainer tests use both in the worker processes (tests/dist_worker_trainer.cpp)
//          and in the test itself: a small classification data set, a tiny model, the arguments
//          of the runs compared with the hand-written loop.
#include <memory>
#include <string>

#include "syncgrad.h"

namespace sg::test::trainer {

constexpr int64_t kExamples = 72;  // 4.5 global batches of 16: the last one is short
constexpr int64_t kGlobalBatch = 16;
constexpr int64_t kSteps = 10;  // 5 optimizer steps per epoch, 2 epochs
constexpr uint64_t kSeed = 3;

// x [size, 4] from randn, y [size] (i64) the class of 3 a fixed linear map of x scores highest.
// Every process builds the same data from `seed`.
std::shared_ptr<data::TensorDataset> classification_data(int64_t size, uint64_t seed = 5);

// Linear(4, 8) LayerNorm(8) Tanh [Dropout(0.2)] Linear(8, 3), the same initial weights every time.
std::shared_ptr<nn::Sequential> tiny_model(bool dropout = false);

// Two epochs of AdamW (lr 0.01, weight decay 0.1) on the linear schedule with 3 warm-up steps,
// `per_device` examples per process and micro-batch, `accumulation` micro-batches per step,
// shuffled with kSeed; no logs during training, no checkpoints, no progress bar.
dist::TrainingArguments reference_arguments(const std::string& output_dir, int64_t per_device, int accumulation);

// Stops a run after optimizer step `step`, saving a checkpoint there.
struct StopAt : dist::TrainerCallback {
  explicit StopAt(int64_t step) : step(step) {}
  void on_step_end(const dist::TrainingArguments&, const dist::TrainerState& state,
                   dist::TrainerControl& control) override;
  int64_t step;
};

// Mid-epoch resume with the reference run at 4 examples per process and 2 micro-batches per step,
// the model with dropout (so the RNG state matters), 2 loader workers and a log every 3 steps (so
// a checkpoint holds part of a logging window). `mode` "full" trains uninterrupted in
// <out>/full_run; "stop" stops after step `stop_at` in <out>/run, saving a checkpoint; "resume"
// continues from the newest checkpoint there.
struct ScenarioRun {
  dist::TrainOutput result;
  dist::TrainerState state;
  nn::StateDict parameters;
  int64_t first_step = 0;  // the first optimizer step this run took
};
ScenarioRun resume_scenario(const std::string& out, const std::string& mode, int64_t stop_at);

// The reference run without accumulation, `per_device` examples per process, in <out>/run, on
// the processes there are: from scratch, stopping after step `stop_at` with a checkpoint there
// (`resume` false), or continuing from that checkpoint (`resume` true). Without loader threads, so
// that each process writes the data set index of every example it trains on, in order, one per
// line, to <out>/<tag>_rank<r>.txt.
void samples_scenario(const std::string& out, const std::string& tag, int64_t per_device, int64_t stop_at, bool resume);

}  // namespace sg::test::trainer
