#include "optim/checkpoint.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/safetensors.h"

namespace sg::optim {

namespace {
using json = nlohmann::json;

constexpr const char* kOptimizerKey = "optimizer";

bool strip_prefix(const std::string& name, const std::string& prefix, std::string& rest) {
  if (name.rfind(prefix, 0) != 0) return false;
  rest = name.substr(prefix.size());
  return true;
}

std::string optimizer_json(const OptimizerState& state) {
  json groups = json::array();
  for (size_t g = 0; g < state.param_groups.size(); ++g)
    groups.push_back({{"num_params", state.group_sizes[g]}, {"hyperparameters", state.param_groups[g]}});
  return json{{"type", state.type}, {"param_groups", groups}}.dump();
}

// The optimizer's JSON from the metadata, read back into `state` (its tensors are added later).
void parse_optimizer_json(const std::string& text, OptimizerState& state) {
  const json value = json::parse(text);
  state.type = value.at("type").get<std::string>();
  for (const json& group : value.at("param_groups")) {
    state.group_sizes.push_back(group.at("num_params").get<int64_t>());
    state.param_groups.push_back(group.at("hyperparameters").get<Hyperparameters>());
  }
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer* optimizer,
                     const Metadata& metadata) {
  SG_CHECK(!metadata.count(kOptimizerKey), "save_checkpoint: ", path, ": the metadata key '", kOptimizerKey,
           "' is reserved for the optimizer's state");
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, tensor] : model.state_dict()) tensors[kModelPrefix + name] = tensor;
  Metadata all_metadata = metadata;
  if (optimizer != nullptr) {
    const OptimizerState state = optimizer->state_dict();
    for (const auto& [key, tensor] : state.tensors) tensors[kOptimizerPrefix + key] = tensor;
    all_metadata[kOptimizerKey] = optimizer_json(state);
  }
  save_safetensors(path, tensors, all_metadata);
}

Metadata load_checkpoint(const std::string& path, nn::Module& model, Optimizer* optimizer, bool strict) {
  SafetensorsFile file = load_safetensors(path);
  nn::StateDict model_state;
  OptimizerState optimizer_state;
  std::vector<std::string> stray;
  for (const auto& [name, tensor] : file.tensors) {
    std::string key;
    if (strip_prefix(name, kModelPrefix, key)) model_state[key] = tensor;
    else if (strip_prefix(name, kOptimizerPrefix, key)) optimizer_state.tensors[key] = tensor;
    else stray.push_back(name);
  }

  try {
    if (strict && !stray.empty()) {
      std::string names;
      for (const auto& name : stray) names += (names.empty() ? "" : ", ") + name;
      SG_FAIL("tensors outside 'model.' and 'optimizer.': ", names);
    }
    model.load_state_dict(model_state, strict);
    if (optimizer != nullptr) {
      auto it = file.metadata.find(kOptimizerKey);
      SG_CHECK(it != file.metadata.end(), "the file holds no optimizer state");
      try {
        parse_optimizer_json(it->second, optimizer_state);
      } catch (const json::exception& error) {
        SG_FAIL("the optimizer's metadata is not what save_checkpoint writes: ", error.what());
      }
      optimizer->load_state_dict(optimizer_state);
    }
  } catch (const Error& error) {
    SG_FAIL("load_checkpoint: ", path, ": ", error.what());
  }
  file.metadata.erase(kOptimizerKey);
  return file.metadata;
}

int64_t metadata_integer(const Metadata& metadata, const std::string& key, const std::string& path, int64_t min,
                         int64_t max) {
  const auto it = metadata.find(key);
  SG_CHECK(it != metadata.end(), "checkpoint ", path, ": no metadata entry '", key, "'");
  const std::string& text = it->second;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  SG_CHECK(!text.empty() && error == std::errc() && stop == end, "checkpoint ", path, ": metadata '", key, "' is \"",
           text, "\", not a whole number");
  SG_CHECK(value >= min && value <= max, "checkpoint ", path, ": metadata '", key, "' is ", value, ", outside [", min,
           ", ", max, "]");
  return value;
}

}  // namespace sg::optim
