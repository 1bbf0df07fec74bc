#include "optim/fine_tuning_weights.h"

#include <algorithm>
#include <vector>

#include "core/safetensors.h"
#include "optim/checkpoint.h"

namespace sg::optim {

namespace {

// The file's weights under the model's names: a checkpoint's "model." tensors without the prefix
// (unless the model's own names start with "model.": then the file is a plain state_dict of it).
nn::StateDict weights_in(const SafetensorsFile& file, const nn::Module& model) {
  bool has_model_tensors = false, only_checkpoint_names = true, model_names_have_prefix = false;
  for (const auto& [name, tensor] : file.tensors) {
    has_model_tensors = has_model_tensors || name.starts_with(kModelPrefix);
    only_checkpoint_names =
        only_checkpoint_names && (name.starts_with(kModelPrefix) || name.starts_with(kOptimizerPrefix));
  }
  for (const auto& [name, tensor] : model.state_dict())
    model_names_have_prefix = model_names_have_prefix || name.starts_with(kModelPrefix);
  if (!has_model_tensors || !only_checkpoint_names || model_names_have_prefix) return file.tensors;
  nn::StateDict weights;
  for (const auto& [name, tensor] : file.tensors)
    if (name.starts_with(kModelPrefix)) weights.emplace(name.substr(std::string(kModelPrefix).size()), tensor);
  return weights;
}

// "a, b, c and 9 more" for an error message.
std::string first_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 3;
  std::string text;
  for (size_t i = 0; i < std::min(kShown, names.size()); ++i) text += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

}  // namespace

nn::PretrainedReport load_fine_tuning_weights(nn::Module& model, const std::string& path,
                                              const std::string& head_prefix) {
  const nn::PretrainedReport report = nn::load_pretrained(model, weights_in(load_safetensors(path), model));
  const auto outside_head = [&](const std::vector<std::string>& names) {
    std::vector<std::string> kept;
    for (const std::string& name : names)
      if (!name.starts_with(head_prefix)) kept.push_back(name);
    return kept;
  };
  const std::vector<std::string> dropped = outside_head(report.dropped_keys);
  const std::vector<std::string> missing = outside_head(report.missing_keys);
  const std::vector<std::string> unexpected = outside_head(report.unexpected_keys);
  if (dropped.empty() && missing.empty() && unexpected.empty()) return report;
  std::string problems;
  for (const auto& [names, what] : {std::pair{&dropped, "with another shape"}, std::pair{&missing, "missing"},
                                    std::pair{&unexpected, "not in the model"}})
    if (!names->empty())
      problems += (problems.empty() ? "" : "; ") + std::to_string(names->size()) + " " + what + " (" +
                  first_names(*names) + ")";
  SG_FAIL("weights ", path, ": loaded ", report.loaded, " of ", report.expected,
          " tensors of the model, but every tensor outside the head (", head_prefix,
          "*) must come from the file, and nothing else may be in it: ", problems,
          ". Is it a file of another model or of another program?");
}

}  // namespace sg::optim
