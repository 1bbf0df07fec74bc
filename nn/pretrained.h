#pragma once
// defines: nn::load_pretrained, nn::PretrainedReport — loading weights trained elsewhere (another
//          head, another framework) into a model for fine-tuning.
//
// Note [Loading pretrained weights]
//   A checkpoint from a model with another head (ImageNet's 1000 classes into a 10-class model)
//   cannot load strictly: fc.weight is [1000, 512] in the file and [10, 512] in the model. The
//   usual recipe keeps only the file's tensors whose size matches the model's, then loads the rest
//   non-strictly. load_pretrained compares whole shapes (a [512, 10] tensor has the numel of a
//   [10, 512] one but is not the same weight), drops the mismatches, loads the rest with
//   Module::load_state_dict(strict = false), and reports the three lists so a run's log shows
//   exactly which weights kept their fresh initialisation. A dtype mismatch is still an error
//   (load_state_dict names the key): a silent conversion could hide loading the wrong file.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace sg::nn {

struct PretrainedReport {
  int64_t loaded = 0;    // the model's tensors (parameters and buffers) that took the file's values
  int64_t expected = 0;  // all of the model's tensors: what a file of the same model loads
  // In the file and the model with different shapes: "fc.weight (file [1000, 512], model [10, 512])".
  std::vector<std::string> dropped_keys;
  std::vector<std::string> missing_keys;     // in the model, not in the file (the model keeps its values)
  std::vector<std::string> unexpected_keys;  // in the file, not in the model (ignored)
  // "loaded L of E tensors", then one line per list, "(none)" for an empty one, for a run's log.
  std::string str() const;
};

// Loads every tensor of `state` whose name and shape the model has; the model's other parameters
// and buffers keep their values. Throws for a dtype mismatch (naming the key) and, given a path,
// for a file load_safetensors cannot read (naming the file).
PretrainedReport load_pretrained(Module& model, const StateDict& state);
// The same from a safetensors file (scripts/convert-torchvision-weights.py writes torchvision's).
PretrainedReport load_pretrained(Module& model, const std::string& safetensors_path);

}  // namespace sg::nn
