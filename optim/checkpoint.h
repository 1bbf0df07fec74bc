#pragma once
// defines: optim::save_checkpoint, optim::load_checkpoint — a model, optionally its optimizer,
//          and the caller's metadata (epoch, step, ...) in one safetensors file.
//
// Note [Checkpoint layout]
// The file is plain safetensors (core/safetensors.h), so Python's `safetensors` opens it:
//   "model.<name>"       every entry of Module::state_dict() (parameters and buffers)
//   "optimizer.<key>"    every tensor of Optimizer::state_dict() ("optimizer.state.0.exp_avg")
//   __metadata__         the caller's entries, plus under "optimizer" the optimizer's type and
//                        param groups as JSON:
//                        {"type": "AdamW", "param_groups": [{"num_params": 4,
//                         "hyperparameters": {"lr": 0.001, "beta1": 0.9, ...}}]}
#include <cstdint>
#include <map>
#include <string>

#include "nn/module.h"
#include "optim/optimizer.h"

namespace sg::optim {

using Metadata = std::map<std::string, std::string>;

// The prefixes of Note [Checkpoint layout].
inline constexpr const char* kModelPrefix = "model.";
inline constexpr const char* kOptimizerPrefix = "optimizer.";

// Writes atomically: on failure the previous file at `path` is intact. The metadata key
// "optimizer" is reserved.
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* optimizer = nullptr,
                     const Metadata& metadata = {});

// Loads the model (Module::load_state_dict with `strict`: a file that does not match lists the
// missing, unexpected, mis-shaped and mis-typed keys) and, when `optimizer` is given, its state
// (the file must hold one that Optimizer::load_state_dict accepts: no negative lr, no step count
// below 1, ...). With strict, tensors outside "model." and "optimizer." are an error too.
// Returns the caller's metadata as saved. Every error names the file. Nothing is converted: a
// tensor relabelled from F32 to I32 is an error, not a silent cast.
Metadata load_checkpoint(const std::string& path, nn::Module& model, Optimizer* optimizer = nullptr,
                         bool strict = true);

// The metadata entry `key` of the checkpoint at `path` read as an integer in [min, max]: the
// whole string is a base-10 number ("7"; not "7 ", "+7" or "1abc"). Throws naming `path` and
// `key` when the entry is missing, is not such a number, or lies outside the range — a resumed
// run must not start from epoch -5.
int64_t metadata_integer(const Metadata& metadata, const std::string& key, const std::string& path, int64_t min,
                         int64_t max);

}  // namespace sg::optim
