#pragma once
// defines: apps::gpt::RunConfig (DataConfig, TrainerConfig, the model's and the optimizer's configs),
//          load_config — train_gpt's YAML file, as the minGPT recipe writes it, with section.key=value
//          overrides. Apart from the program so that the fuzz target for the config reader
//          (tests/fuzz/fuzz_gpt_config.cpp) calls the same code.
#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt.h"

namespace sg::apps::gpt {

// The recipe's four sections, plus a few keys of ours in trainer_config.
struct DataConfig {
  std::string path = "fortunes";  // "fortunes": the built-in corpus (data::fortunes_corpus)
  int64_t block_size = 128;
  double train_split = 0.9;
  double truncate = 1.0;
};

struct TrainerConfig {
  int64_t max_epochs = 10;
  int64_t batch_size = 64;
  int64_t data_loader_workers = 0;
  double grad_norm_clip = 1.0;
  std::string snapshot_path = "snapshot.safetensors";
  int64_t save_every = 1;
  // Ours: also a snapshot every save_every_steps optimizer steps (0: none), inside the epoch, the
  // newest `keep` kept (0: all), in <snapshot_path>.steps/ (dist::step_snapshots).
  int64_t save_every_steps = 0;
  int64_t keep = 2;
  bool use_amp = false;
  // Ours: the autocast type of use_amp (f16 with the loss scaler, or bf16; empty: the device's
  // choice, train_gpt.cpp's mixed_precision_for), the seed of the init, split, shuffling and
  // dropout, a CSV loss log, and the sample printed after training.
  std::string amp_dtype;
  bool activation_checkpointing = false;  // recompute each Block's activations in backward (docs/memory.md)
  int gradient_accumulation_steps = 1;    // micro-batches of batch_size per optimizer step (docs/accelerator.md)
  bool amp_debug = false;  // f16: the loss scaler's diagnostics (dist::AcceleratorOptions::amp_diagnostics)
  int64_t seed = 0;
  std::string log_path;
  std::string tensorboard_dir;  // TensorBoard event files: train and eval loss, grad norm, loss scale
  int64_t sample_tokens = 200;
  std::string sample_prompt;  // empty: the text's first character
};

struct RunConfig {
  DataConfig data;
  sg::models::GPTConfig gpt;
  TrainerConfig trainer;
  sg::models::OptimizerConfig optimizer;
};

// Reads the YAML file at `path` (sections data_config, gpt_config, trainer_config,
// optimizer_config; a hydra section is ignored) and applies `overrides`, each section.key=value
// with the value read as YAML (2, 0.5, true, gpt-nano). Throws an sg::Error naming the file and
// the key for a file that is not YAML, an unknown section or key, a value of the wrong type or
// out of range.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace sg::apps::gpt
